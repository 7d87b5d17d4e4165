#!/usr/bin/env bash
# The main job on a GPU machine: `gk bench` over each suite (047, 054, the models suite gemma3, decode) in a process of
# its own, as the official harness runs each problem (CUPTI spans; CUDA events alongside would read the single-wave
# shapes 1.5-3 us higher, and a suite timed right after the other ~0.5 us higher: docs/perf-log.md v14), then the
# PyTorch peers (bench/peers.py), merged into markdown tables and charts. Builds first if there is no build.
#   scripts/bench.sh             # results into bench/results/
#   OUT=/tmp/r scripts/bench.sh  # elsewhere; GK_SKIP_PEERS=1 skips the peers
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${GK_BUILD_DIR:-build}
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
if [ ! -x "$BUILD/bin/gk" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build "$BUILD" || exit 1
fi
rc=0
: > "$OUT/gk-bench.txt"
for s in 047 054 gemma3 decode; do
  "$BUILD/bin/gk" bench --suite $s --json "$OUT/gk-bench-$s.json" | tee -a "$OUT/gk-bench.txt"
  [ "${PIPESTATUS[0]}" -ne 0 ] && rc=1
done
if [ "${GK_SKIP_PEERS:-0}" != 1 ]; then
  PYTHONUNBUFFERED=1 python3 bench/peers.py --ours "$OUT/gk-bench-047.json" --ours "$OUT/gk-bench-054.json" \
    --ours "$OUT/gk-bench-gemma3.json" --ours "$OUT/gk-bench-decode.json" --suites 054,047,gemma3,decode --out "$OUT"
fi
exit "$rc"
