#!/usr/bin/env bash
# An A/B of two builds of the Python package in one device call: the tree in OLD_TREE (a commit exported into the
# repository before the call, e.g. `git archive cf5187f | tar -x -C ab-old`; untracked, so it travels with the call)
# against this checkout, each benchmark run alternating old, new, old, new... on the same GPU.
#   usage: bench/probes/ab_python_bench.sh OLD_TREE BENCH_SCRIPT [ROUNDS] [BENCH_ARGS...]
#   e.g.:  bench/probes/ab_python_bench.sh ab-old bench/fp8_gemm_m_grouped_bench.py 3
# Prints each run's lines that start with a digit or PASS/FAIL, prefixed "old i:" / "new i:". Builds with /usr/bin/g++
# (device-run.sh says why).
set -uo pipefail
old_tree=$1 bench=$2 rounds=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
export PATH=/usr/local/cuda/bin:$PATH
build() {  # source dir, target dir
  CXX=/usr/bin/g++ timeout 150 python3 -m pip install -q --no-build-isolation --no-deps --target "$2" "$1" \
    >"$2.log" 2>&1 || { echo "build of $1 failed:"; tail -20 "$2.log"; return 1; }
}
build "$old_tree" /tmp/ab-old-pkg & old_pid=$!
build . /tmp/ab-new-pkg || exit 1
wait $old_pid || exit 1
for i in $(seq 1 "$rounds"); do
  for v in old new; do
    PYTHONPATH=/tmp/ab-$v-pkg DG_JIT_CACHE_DIR=/tmp/ab-cache-$v timeout 120 python3 "$bench" "$@" 2>&1 |
      grep -E '^[0-9]|^PASS|^FAIL' | sed "s/^/$v $i: /"
  done
done
