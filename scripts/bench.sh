#!/usr/bin/env bash
# The main job on a GPU machine: `gk bench` over both suites (CUPTI spans, CUDA events alongside), then the
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
"$BUILD/bin/gk" bench --timer both --json "$OUT/gk-bench.json" | tee "$OUT/gk-bench.txt"
rc=${PIPESTATUS[0]}
if [ "${GK_SKIP_PEERS:-0}" != 1 ]; then
  PYTHONUNBUFFERED=1 python3 bench/peers.py --ours "$OUT/gk-bench.json" --out "$OUT"
fi
exit "$rc"
