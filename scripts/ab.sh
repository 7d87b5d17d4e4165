#!/usr/bin/env bash
# Paired A/B timing of two builds of the library on a suite (AB_SUITE: 047 by default, or 054): runs alternate
# (A, B, A, B, ...) so machine drift hits both alike, and each run prints the suite mean and, per workload, the
# median duration of the kernels whose name matches AB_KERNEL (default: attention; from `gk bench --breakdown`).
#
#   scripts/ab.sh DIR_A DIR_B [ROUNDS] [extra gk bench options...]
#
# DIR_A and DIR_B each hold a libgk.so.0; the gk binary comes from GK_BUILD_DIR (default build).
set -uo pipefail
cd "$(dirname "$0")/.."
A=$1 B=$2 ROUNDS=${3:-2}
shift $(( $# < 3 ? $# : 3 ))
GK=${GK_BUILD_DIR:-build}/bin/gk
KERNEL=${AB_KERNEL:-attention}
SUITE=${AB_SUITE:-047}
for r in $(seq 1 "$ROUNDS"); do
  for side in A B; do
    dir=$A; [ "$side" = B ] && dir=$B
    out=$(LD_LIBRARY_PATH="$dir" "$GK" bench --suite "$SUITE" --breakdown --rounds 0 "$@" 2>&1)
    mean=$(grep -m1 "^suite $SUITE: mean" <<< "$out" | awk '{print $4}')
    durs=$(awk -v k="$KERNEL" '/kernels in launch order/ {w = $3 $4} $0 ~ k && w != "" && !/launch order/ {
             for (i = 1; i <= NF; ++i) if ($i == "dur") printf "%s%s ", w, $(i + 1)}' <<< "$out")
    echo "round $r $side ($dir): mean $mean | $KERNEL $durs"
  done
done
