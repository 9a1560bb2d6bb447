#!/usr/bin/env bash
# One device call for the branch wip/reduce-32 (the weight-gradient form's reduce-adds in 32-column boxes where
# BLOCK_N allows): the reduce-add probe, then the branch's Python GPU tests, then its times against main's.
#   Before the call, put main's tree beside this one (untracked, so it travels with the working tree):
#     rm -rf probe/old && mkdir -p probe/old && git archive main | tar -x -C probe/old
#   Then: bash bench/probes/reduce32_ab.sh   (logs under $OUT). The C++ GPU test under NVCC and NVRTC is a second
#   call: ONLY='fp8_gemm_wgrad_test' bash scripts/device-run.sh tests
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"
[[ -d probe/old ]] || { echo "probe/old (main's tree) is missing: see this script's header"; exit 2; }
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$nvcc_bin" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/reduce_add_probe \
  bench/probes/reduce_add_probe.cu -lcuda && /tmp/reduce_add_probe 2>&1 | tee "$out/reduce_add_probe.log" \
  | grep -E "pf\+|reduce16/2|reduce32/2|FAIL"
build() { (cd "$1" && CXX=/usr/bin/g++ python3 -m pip install --no-build-isolation --no-deps --target "$2" . \
  > "$out/build_$3.log" 2>&1) || { echo "build of $3 failed"; tail -20 "$out/build_$3.log"; exit 1; }; }
build . /tmp/pkg-new new & build probe/old /tmp/pkg-old old & wait
PYTHONPATH=/tmp/pkg-new timeout 300 python3 tests/python/test_gpu_fp8_gemm.py > "$out/test_gpu_fp8_gemm.log" 2>&1
echo "test_gpu_fp8_gemm.py (branch): rc $?"; grep -E "^(PASS|FAIL)" "$out/test_gpu_fp8_gemm.log"
# main, branch, branch, main: each prints times and D's bits, which must agree between the trees.
for tag in old new new2 old2; do
  PYTHONPATH=/tmp/pkg-${tag%2} DG_JIT_CACHE_DIR=/tmp/cache-${tag%2} timeout 200 \
    python3 bench/probes/wgrad_times.py $tag 2>&1 | grep -v Warn | tee -a "$out/wgrad_times.log"
done
