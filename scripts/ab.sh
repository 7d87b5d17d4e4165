#!/usr/bin/env bash
# Paired A/B timing of two builds of the library on a suite (AB_SUITE: 047 by default, or 054): runs alternate
# (A B, then B A, ...) so machine drift and any first-run effect hit both alike, and each run prints the suite mean
# and, per workload, the median duration of the kernels whose name matches AB_KERNEL (default: attention; from
# `gk bench --breakdown`).
#
#   scripts/ab.sh DIR_A DIR_B [ROUNDS] [extra gk bench options...]
#
# DIR_A and DIR_B each hold a libgk.so.0; the gk binary comes from GK_BUILD_DIR (default build). AB_SUITE=custom
# times the custom shape the options give (e.g. --op gemma3 --batch 1 --seq-len 8192 --softcap 0) instead of a suite;
# gk takes a shape as custom only with --op.
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 DIR_A DIR_B [ROUNDS] [gk bench options...]" >&2
  exit 2
fi
# Paths are taken relative to where the script is called from.
A=$(realpath "$1") B=$(realpath "$2")
ROUNDS=2
if [ $# -ge 3 ] && [[ $3 =~ ^[0-9]+$ ]]; then
  ROUNDS=$3
  shift 3
else
  shift 2
fi
GK=$(realpath "${GK_BUILD_DIR:-$(dirname "$0")/../build}")/bin/gk
KERNEL=${AB_KERNEL:-attention}
SUITE=${AB_SUITE:-047}
[ -x "$GK" ] || { echo "ab.sh: no gk binary at $GK" >&2; exit 2; }
for dir in "$A" "$B"; do
  # gk finds build/lib through its RUNPATH, so a folder without the library would silently time that one instead.
  [ -e "$dir/libgk.so.0" ] || { echo "ab.sh: no libgk.so.0 in $dir" >&2; exit 2; }
done

run_side() {  # run_side ROUND LABEL DIR
  local out mean durs
  local suite_opt=(--suite "$SUITE")
  [ "$SUITE" = custom ] && suite_opt=()
  out=$(LD_LIBRARY_PATH="$3${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$GK" bench "${suite_opt[@]}" --breakdown \
        --rounds 0 "${EXTRA[@]}" 2>&1)
  local rc=$?
  mean=$(grep -m1 "^suite $SUITE: mean" <<< "$out" | awk '{print $4}')
  if [ $rc -ne 0 ] || [ -z "$mean" ]; then
    echo "ab.sh: gk bench failed for $3 (rc $rc):" >&2
    tail -5 <<< "$out" >&2
    exit 1
  fi
  durs=$(awk -v k="$KERNEL" '/kernels in launch order/ {w = $3 " " $4} $0 ~ k && w != "" && !/launch order/ {
           for (i = 1; i <= NF; ++i) if ($i == "dur") printf "%s %s  ", w, $(i + 1)}' <<< "$out")
  echo "round $1 $2 ($3): mean $mean | $KERNEL: $durs"
}

EXTRA=("$@")
if [ "$SUITE" = custom ] && [[ " ${EXTRA[*]} " != *" --op "* ]]; then
  echo "ab.sh: AB_SUITE=custom needs --op gemma3|audio among the gk bench options" >&2
  exit 2
fi
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then
    run_side "$r" A "$A"
    run_side "$r" B "$B"
  else
    run_side "$r" B "$B"
    run_side "$r" A "$A"
  fi
done
