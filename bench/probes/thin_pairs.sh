#!/usr/bin/env bash
# The thin-pairs term's timings (kThinPairsPenalty in fp8_gemm_heuristic.cpp) on the card at hand, through the GPU test
# harness: bench/probes/thin_pairs_moves.txt (the 24 calls it moves, old tile against new) and, with --calls,
# bench/probes/thin_pairs_calls.txt (pairs against 128-row tiles at M <= 512). Every call runs in both orders; prints
# each call's tiles (the two orders averaged) and, for the moves, new / old on geometric mean. Logs go to $OUT (or
# ./device-out). The H200's check of the moves is owed (the forty-seventh session timed them on an H100).
#   usage: bench/probes/thin_pairs.sh [--calls]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH DG_JIT_USE_NVRTC=1
export DG_JIT_CACHE_DIR=${DG_JIT_CACHE_DIR:-/tmp/kiln-thin-pairs-cache}
if ! { cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=/usr/bin/g++ \
         -DKILN_BUILD_TESTS=OFF >"$out/thin_pairs_build.log" 2>&1 &&
       cmake --build build-device --target fp8_gemm_test >>"$out/thin_pairs_build.log" 2>&1; }; then
  tail -30 "$out/thin_pairs_build.log"
  exit 1
fi
files=(bench/probes/thin_pairs_moves.txt)
[[ ${1:-} == --calls ]] && files+=(bench/probes/thin_pairs_calls.txt)
for f in "${files[@]}"; do
  name=$(basename "$f" .txt)
  timeout 500 build-device/tests/fp8_gemm_test --shapes "$f" >"$out/$name.log" 2>&1
  echo "$name: exit $?, $(grep -c '^PASS' "$out/$name.log") PASS, $(grep -c '^FAIL' "$out/$name.log") FAIL"
  python3 bench/probes/thin_pairs_summary.py "$out/$name.log" "$f"
done
echo "($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))"
