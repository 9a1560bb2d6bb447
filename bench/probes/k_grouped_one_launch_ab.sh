#!/usr/bin/env bash
# One device call for the branch wip/k-grouped-one-launch: correctness, then the speed of one launch per 32 groups
# against main's one launch per group.
#   Before the call, put main's tree beside this one (untracked, so it travels with the working tree):
#     rm -rf probe/old && mkdir -p probe/old && git archive main | tar -x -C probe/old
#   Then: bash bench/probes/k_grouped_one_launch_ab.sh   (logs under $OUT, a table last)
# The C++ GPU test covers the k-grouped call too, under NVCC and NVRTC (run_k_grouped in
# tests/gpu/fp8_gemm_wgrad_test.cpp): a second call, ONLY='fp8_gemm_wgrad_test' bash scripts/device-run.sh tests.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"
[[ -d probe/old ]] || { echo "probe/old (main's tree) is missing: see this script's header"; exit 2; }
build() { (cd "$1" && CXX=/usr/bin/g++ python3 -m pip install --no-build-isolation --no-deps --target "$2" . \
  > "$out/build_$3.log" 2>&1) || { echo "build of $3 failed"; tail -20 "$out/build_$3.log"; exit 1; }; }
build . /tmp/pkg-new new & build probe/old /tmp/pkg-old old & wait
# Correctness first: the whole GPU test file on the branch's build (the k-grouped tests run its one-launch path).
PYTHONPATH=/tmp/pkg-new timeout 300 python3 tests/python/test_gpu_fp8_gemm.py > "$out/test_gpu_fp8_gemm.log" 2>&1
echo "test_gpu_fp8_gemm.py (branch): rc $?"; grep -E "^(PASS|FAIL)" "$out/test_gpu_fp8_gemm.log"
# Speed: main, branch, branch, main (each run writes its JSON into its own directory).
for tag in old new new2 old2; do
  pkg=/tmp/pkg-${tag%2}
  mkdir -p "$out/$tag"
  PYTHONPATH=$pkg timeout 240 python3 bench/fp8_gemm_k_grouped_bench.py --idle-ms 100 --out "$out/$tag" \
    > "$out/bench_$tag.log" 2>&1
  echo "bench $tag: rc $?"; grep -E "^\|" "$out/bench_$tag.log" | tail -4
done
