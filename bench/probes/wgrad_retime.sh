#!/usr/bin/env bash
# The weight-gradient form's re-timings on the H200, in one device call of about seven minutes: how far ahead its
# pipeline should run at short K (wgrad_ring_lengths.py, built from a copy of the tree with wgrad_ring_lengths.patch
# applied), the H100 lead rule's calls and the K = 384 lead's own check (wgrad_plan_moves.py: lead_ring_c, lead_384_c),
# the 7-block fade's moves (fade_7_c, fade_7_bulk_c), the wide-penalty moves, the short-K tables' calls and
# kAccumulateMoves' pairs (wgrad_small_k_tiles.py). The forty-sixth session ran every step but lead_384 on the H200,
# the forty-seventh timed fade_7 on an H100 only; what is owed now: ONLY='lead_384|fade_7' (the patched package is
# built only for ring_lengths). Each step's JSON and one log of them all go to $OUT (or ./device-out).
#   usage: [ONLY='regex'] bench/probes/wgrad_retime.sh [--any-card]   (stops at once, exit 3, on a GPU that is not
#   an H200)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ ${1:-} != --any-card && $gpu != *H200* ]]; then
  echo "$gpu: not an H200, nothing timed (--any-card times it anyway)"
  exit 3
fi

# ONLY='regex' runs just the steps whose names match (e.g. ONLY='ring_lengths|lead_ring' where time is short).
only=${ONLY:-.}
# The Python package built from the tree as it is (/usr/bin/g++: the H200 image's default wrappers made crashing
# extensions), and, beside it when the ring_lengths step runs, from a copy with the probe-only patch that lets
# KILN_PROBE_RING set the ring length.
pkg=/tmp/kiln-retime-pkg
probe_pkg=/tmp/kiln-retime-probe-pkg
patched=/tmp/kiln-retime-tree
rm -rf "$pkg" "$probe_pkg" "$patched"
build() {  # source tree, target folder, log
  CXX=/usr/bin/g++ python3 -m pip install --no-build-isolation --no-deps --target "$2" "$1" >"$3" 2>&1
}
build . "$pkg" /tmp/kiln-retime-pip.log &
jobs_started=($!)
if [[ ring_lengths =~ $only ]]; then
  mkdir -p "$patched"
  tar --exclude=./.git --exclude='./build*' --exclude=./device-out -cf - . | tar -C "$patched" -xf -
  if ! (cd "$patched" && patch -p1 -s <bench/probes/wgrad_ring_lengths.patch); then
    echo "wgrad_ring_lengths.patch does not apply to this tree"
    exit 1
  fi
  build "$patched" "$probe_pkg" /tmp/kiln-retime-probe-pip.log &
  jobs_started+=($!)
fi
for job in "${jobs_started[@]}"; do
  if ! wait "$job"; then
    tail -n 30 /tmp/kiln-retime-pip.log /tmp/kiln-retime-probe-pip.log 2>/dev/null
    echo "a package build failed"
    exit 1
  fi
done

export DG_JIT_CACHE_DIR=${DG_JIT_CACHE_DIR:-/tmp/kiln-retime-cache} DG_JIT_USE_NVRTC=1
step() {  # name, timeout seconds, package, probe and its arguments
  local name=$1 limit=$2 path=$3
  shift 3
  [[ $name =~ $only ]] || return 0
  echo "==== $name" >>"$out/retime.log"
  PYTHONPATH=$path timeout "$limit" python3 "$@" --json "$out/$name.json" >>"$out/retime.log" 2>&1
  echo "$name: exit $?; $(tail -1 "$out/retime.log")"
}
step ring_lengths 150 "$probe_pkg" bench/probes/wgrad_ring_lengths.py
step lead_ring 60 "$pkg" bench/probes/wgrad_plan_moves.py --only lead_ring_c
step lead_384 60 "$pkg" bench/probes/wgrad_plan_moves.py --only lead_384_c
step fade_7 150 "$pkg" bench/probes/wgrad_plan_moves.py --only fade_7_c --only fade_7_bulk_c
step wide_penalty 150 "$pkg" bench/probes/wgrad_plan_moves.py --only wide_penalty_c --only wide_penalty_none
step short_k 110 "$pkg" bench/probes/wgrad_small_k_tiles.py
step accumulate_moves 100 "$pkg" bench/probes/wgrad_small_k_tiles.py --c-only --test-table kAccumulateMoves
grep -sh "calls, plan" "$out/retime.log"
echo "($gpu)"
