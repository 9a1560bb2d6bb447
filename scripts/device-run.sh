#!/usr/bin/env bash
# One call on a GPU machine (the lent H200): build, run every GPU test and the benchmarks, keep the logs under
# $OUT (or ./device-out), and print a short table last.
#   usage: scripts/device-run.sh [tests|bench|python|all]   (default all; python: only the Python package's steps)
# Builds with /usr/bin/g++: on the H200 image the default CC/CXX wrappers produced binaries that crashed.
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
# Logs go to a scratch folder and come back as one archive ($OUT returns at most 8 files).
final_out=${OUT:-$PWD/device-out}
out=$(mktemp -d /tmp/kiln-device-logs.XXXXXX)
mkdir -p "$final_out"
export PATH=/usr/local/cuda/bin:$PATH
export DG_JIT_CACHE_DIR=${DG_JIT_CACHE_DIR:-/tmp/kiln-device-cache}
build=build-device
summary=()
record() { summary+=("$(printf '%-34s %-6s %s' "$1" "$2" "$3")"); }

start=$(date +%s)
if ! { cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=/usr/bin/g++ \
         -DKILN_BUILD_TESTS=OFF >"$out/build.log" 2>&1 &&
       cmake --build $build -j "$(nproc)" >>"$out/build.log" 2>&1; }; then
  tail -40 "$out/build.log"
  echo "BUILD FAILED (log: build.log)"
  exit 1
fi
record build ok "$(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader \
  >"$out/gpu.txt" 2>&1 || true

# ONLY='regex' runs just the steps whose names match (e.g. ONLY='fp8_gemm|jit_bench|python').
only=${ONLY:-.}
# Every step ends by DEADLINE_S seconds after the start (default 570: the device tool stops a call at 600 s, and a
# call stopped there brings no logs back): a step gets at most the time left, and none starts with under 20 s left.
deadline=$(( start + ${DEADLINE_S:-570} ))
time_left() { local left=$(( deadline - $(date +%s) )); echo $(( left > 1 ? left : 1 )); }
run_step() {  # name, timeout seconds, command...
  local name=$1 limit=$2; shift 2
  [[ $name =~ $only ]] || return 0
  local left=$(time_left)
  if (( left < 20 )); then
    record "$name" SKIP "no time left before the ${DEADLINE_S:-570} s deadline"
    return 0
  fi
  (( limit > left )) && limit=$left
  local t0=$(date +%s)
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  local status=PASS; [[ $rc -eq 0 ]] || status="FAIL($rc)"
  record "$name" "$status" "$(( $(date +%s) - t0 )) s; $(grep -cE '^PASS' "$out/$name.log") PASS lines, $(grep -cE '^FAIL' "$out/$name.log") FAIL lines"
}

if [[ $what == tests || $what == all ]]; then
  for src in tests/gpu/*_test.cpp; do
    t=$build/tests/$(basename "$src" .cpp)
    [[ -x $t ]] && run_step "$(basename "$t")" 300 "$t"
  done
  DG_JIT_USE_RUNTIME_API=1 run_step quantize_test_runtime_api 120 $build/tests/quantize_test
  DG_JIT_USE_NVRTC=1 run_step quantize_test_nvrtc 120 $build/tests/quantize_test
  # The FP8 GEMM built by NVRTC: checked the same way, and timed beside the NVCC run of fp8_gemm_op_test.
  DG_JIT_USE_NVRTC=1 run_step fp8_gemm_op_test_nvrtc 180 $build/tests/fp8_gemm_op_test --quick
  # The weight-gradient form built by NVRTC: every case of its test, its two timed shapes beside NVCC's.
  DG_JIT_USE_NVRTC=1 run_step fp8_gemm_wgrad_test_nvrtc 240 $build/tests/fp8_gemm_wgrad_test
  # The kernel harness built by NVRTC: every shape and configuration of fp8_gemm_test. Since 98e73f5 NVRTC's
  # build of the math loop differs from NVCC's in source (32-bit shared addresses, MathState::kShared32).
  [[ -x $build/tests/fp8_gemm_test ]] && DG_JIT_USE_NVRTC=1 run_step fp8_gemm_test_nvrtc 180 $build/tests/fp8_gemm_test
  # The same NVRTC compile in two processes: both must carry ptxas's resource report (fp8_gemm_test's compile
  # check). With NVRTC's own cache on, the second was a hit there, with no report (kiln passes --no-cache).
  [[ -x $build/tests/fp8_gemm_test ]] && DG_JIT_USE_NVRTC=1 run_step fp8_gemm_test_nvrtc_twice 120 bash -c \
    "$build/tests/fp8_gemm_test --shape 128 2112 7168 64x32 && $build/tests/fp8_gemm_test --shape 128 2112 7168 64x32"
  # The BF16 m-grouped forms alone (a step of their own, for a call that has time for nothing else).
  run_step bf16_gemm_grouped_test 200 $build/tests/bf16_gemm_test --grouped
  # The MN-major layouts alone (nn, tn, tt; forced CTA pairs with an N-major B among them).
  run_step bf16_gemm_layouts_test 200 $build/tests/bf16_gemm_test --layouts
  # The BF16 GEMM built by NVRTC: the dense shapes and the ragged ones; and every k-grouped case.
  DG_JIT_USE_NVRTC=1 run_step bf16_gemm_test_nvrtc 180 $build/tests/bf16_gemm_test --quick
  DG_JIT_USE_NVRTC=1 run_step bf16_gemm_k_grouped_test_nvrtc 120 $build/tests/bf16_gemm_k_grouped_test
  run_step demo 120 $build/kiln_demo
fi
if [[ $what == bench || $what == all ]]; then
  for b in $build/bench/quantize_bench $build/bench/jit_bench $build/tests/launch_overhead_bench; do
    [[ -x $b ]] && run_step "$(basename "$b")" 150 "$b"
  done
  # The FP8 GEMM kernel's configuration sweep (each configuration checked, then timed): what the heuristic
  # and the kernel's variants are measured by. SWEEP_M=1,16,64 limits it to those M.
  [[ -x $build/tests/fp8_gemm_test ]] && run_step fp8_gemm_sweep 420 $build/tests/fp8_gemm_test --sweep${SWEEP_M:+=$SWEEP_M}
  # Hardware counters of the large-M kernel (where it trails DeepGEMM most), with its serial-promotion twin:
  # launch 0 is the overlapped kernel's checked launch, launch 24 the serial one's. ncu works on the
  # Firecracker machines only; --clock-control none leaves the clocks alone (METHOD.md).
  if command -v ncu >/dev/null && [[ -x $build/tests/fp8_gemm_test ]]; then
    for skip in 0 24; do
      run_step "fp8_gemm_ncu_$skip" 240 ncu --clock-control none -k kiln_fp8_gemm_nt --launch-skip $skip --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
        --section ComputeWorkloadAnalysis --section SchedulerStats \
        $build/tests/fp8_gemm_test --shape ${NCU_SHAPE:-4096 7168 16384}
    done
  fi
fi

# The Python package (issue 4): built as `pip install .` builds it, with /usr/bin/g++ and the machine's own
# scikit-build-core and nanobind (no package registry there), into a private directory; then its GPU tests,
# the whole pytest suite when pytest is installed (without the GEMMs' GPU files, which have steps of their own), the
# host-overhead benchmark and the FP8 GEMM benchmarks against cuBLAS, both forms (their JSON and PNG go to $OUT
# directly).
# Just these steps: ONLY='^python$|python_gpu_fp8_gemm|python_gpu_bf16_gemm|python_fp8_gemm_bench|
# python_fp8_gemm_wgrad_bench|python_fp8_gemm_k_grouped_bench|python_fp8_gemm_m_grouped_bench|
# python_fp8_gemm_masked_bench|python_bf16_gemm_bench|python_bf16_gemm_grouped_bench|
# python_bf16_gemm_k_grouped_bench'.
if [[ ($what == bench || $what == python || $what == all) && python =~ $only ]]; then
  pydir=$PWD/$build/python-package
  t0=$(date +%s)
  rm -rf "$pydir"
  if CXX=/usr/bin/g++ timeout "$(time_left)" \
       python3 -m pip install --no-build-isolation --no-deps --target "$pydir" . >"$out/python_build.log" 2>&1; then
    record python_build ok "$(( $(date +%s) - t0 )) s"
    if [[ $what != bench ]]; then
      PYTHONPATH=$pydir run_step python_gpu_ops 200 python3 tests/python/test_gpu_ops.py
      PYTHONPATH=$pydir run_step python_gpu_threads 120 python3 tests/python/test_gpu_threads.py
      PYTHONPATH=$pydir run_step python_gpu_fp8_gemm 300 python3 tests/python/test_gpu_fp8_gemm.py
      PYTHONPATH=$pydir run_step python_gpu_bf16_gemm 200 python3 tests/python/test_gpu_bf16_gemm.py
      if python3 -c "import pytest, numpy" 2>/dev/null; then
        PYTHONPATH=$pydir run_step python_pytest 240 python3 -m pytest -q -p no:cacheprovider \
          --ignore=tests/python/test_gpu_fp8_gemm.py --ignore=tests/python/test_gpu_bf16_gemm.py tests/python
      fi
    fi
    [[ $what != tests ]] && PYTHONPATH=$pydir run_step python_overhead 300 python3 bench/python_overhead.py
    [[ $what != tests ]] && PYTHONPATH=$pydir run_step python_fp8_gemm_bench 240 \
      python3 bench/fp8_gemm_bench.py --out "$final_out"
    [[ $what != tests ]] && PYTHONPATH=$pydir run_step python_fp8_gemm_wgrad_bench 240 \
      python3 bench/fp8_gemm_wgrad_bench.py --out "$final_out"
    [[ $what != tests ]] && PYTHONPATH=$pydir run_step python_fp8_gemm_k_grouped_bench 240 \
      python3 bench/fp8_gemm_k_grouped_bench.py --out "$final_out"
    [[ $what != tests ]] && PYTHONPATH=$pydir run_step python_fp8_gemm_m_grouped_bench 240 \
      python3 bench/fp8_gemm_m_grouped_bench.py --out "$final_out"
    [[ $what != tests ]] && PYTHONPATH=$pydir run_step python_fp8_gemm_masked_bench 240 \
      python3 bench/fp8_gemm_masked_bench.py --out "$final_out"
    # BF16_SWEEP=1 adds every forced tile of the sweep (the plan's cost model is fitted to it);
    # BF16_ACCUMULATE_SWEEP=1 the float32 D += A . B^T form's at M = 4096.
    [[ $what != tests ]] && PYTHONPATH=$pydir run_step python_bf16_gemm_bench 420 \
      python3 bench/bf16_gemm_bench.py --out "$final_out" --accumulate --layouts ${BF16_SWEEP:+--sweep} \
      ${BF16_ACCUMULATE_SWEEP:+--sweep-accumulate}
    # The accumulate sweep alone at M = 4096 (a step of its own, selected by ONLY; JSON bf16_gemm_bench_m4096.json).
    [[ $what != tests && -n ${BF16_ACCUMULATE_SWEEP:-} ]] && PYTHONPATH=$pydir run_step python_bf16_accumulate_sweep 300 \
      python3 bench/bf16_gemm_bench.py --out "$final_out" --m 4096 --sweep-accumulate
    # The m-grouped forms (contiguous and masked) on the FP8 grouped benchmarks' MoE shapes, in a step of their own so
    # that the dense step keeps its time; their JSON is bf16_gemm_grouped_bench.json.
    [[ $what != tests ]] && PYTHONPATH=$pydir run_step python_bf16_gemm_grouped_bench 240 \
      python3 bench/bf16_gemm_bench.py --out "$final_out" --no-dense --m-grouped --masked
    # The k-grouped weight gradients (k_grouped_bf16_gemm_tn_contiguous) on DeepSeek-V3's expert shapes, a step of their
    # own for the same reason; their JSON is bf16_gemm_k_grouped_bench.json.
    [[ $what != tests ]] && PYTHONPATH=$pydir run_step python_bf16_gemm_k_grouped_bench 240 \
      python3 bench/bf16_gemm_bench.py --out "$final_out" --no-dense --k-grouped
  else
    tail -30 "$out/python_build.log"
    record python_build FAIL "$(( $(date +%s) - t0 )) s (log: python_build.log)"
  fi
fi

echo
echo "==== logs in $out; last lines of each ===="
for f in "$out"/*.log; do
  [[ $f == */build.log ]] && continue
  echo "--- $(basename "$f")"; tail -n 12 "$f"
done
echo
grep -h '^RESULT' "$out"/*.log > "$out/results.txt" 2>/dev/null
printf '%s\n' "${summary[@]}" > "$out/summary.txt"
tar -C "$out" -czf "$final_out/logs.tar.gz" .
cp "$out/summary.txt" "$out/results.txt" "$final_out/" 2>/dev/null
echo "==== results ===="
cat "$out/results.txt"
echo "==== summary ($(cat "$out/gpu.txt" 2>/dev/null)) ===="
printf '%s\n' "${summary[@]}"
