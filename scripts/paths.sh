#!/usr/bin/env bash
# Times one library build under several plans (GK_OVERRIDES specs, e.g. "qkv=cublas" against the planner's
# choice) on a suite, in alternating order (configuration 1 2 3, then 3 2 1, ...), so that machine drift hits
# every configuration alike; each run checks every workload first (gk bench's own check, --rounds 1). Prints, per
# workload, the median of each run, and each run's suite mean.
#
#   scripts/paths.sh SUITE ROUNDS "CONFIG" ["CONFIG" ...] [-- gk bench options...]
#
# A CONFIG is an override spec in GK_OVERRIDES' syntax ("" for the planner's choices; docs/dispatch.md lists the
# keys). GK_BUILD_DIR picks the build (default build).
set -uo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 SUITE ROUNDS CONFIG [CONFIG...] [-- gk bench options]" >&2
  exit 2
fi
SUITE=$1 ROUNDS=$2
shift 2
CONFIGS=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do CONFIGS+=("$1"); shift; done
[ $# -gt 0 ] && shift
EXTRA=("$@")
GK=$(realpath "${GK_BUILD_DIR:-$(dirname "$0")/../build}")/bin/gk
[ -x "$GK" ] || { echo "paths.sh: no gk binary at $GK" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

n=${#CONFIGS[@]}
for r in $(seq 1 "$ROUNDS"); do
  for i in $(seq 0 $((n - 1))); do
    c=$i
    [ $((r % 2)) -eq 0 ] && c=$((n - 1 - i))
    out="$TMP/run-$c-$r.txt"
    if ! env GK_OVERRIDES="${CONFIGS[$c]}" "$GK" bench --suite "$SUITE" --rounds 1 "${EXTRA[@]}" > "$out" 2>&1; then
      echo "paths.sh: gk bench failed under '${CONFIGS[$c]}':" >&2
      grep -E "FAIL|error|rror" "$out" | head -5 >&2
      tail -3 "$out" >&2
    fi
  done
done

for c in $(seq 0 $((n - 1))); do echo "config $((c + 1)): ${CONFIGS[$c]:-(defaults)}"; done
printf '%-14s' workload
for c in $(seq 1 "$n"); do for r in $(seq 1 "$ROUNDS"); do printf '%10s' "c$c.r$r"; done; done
echo
awk '/^B=/ {print $1 " " $2}' "$TMP/run-0-1.txt" | while read -r b s; do
  printf '%-14s' "$b $s"
  for c in $(seq 0 $((n - 1))); do
    for r in $(seq 1 "$ROUNDS"); do
      v=$(awk -v b="$b" -v s="$s" '$1 == b && $2 == s {print ($3 == "pass" ? $6 : $3 ":" $6); exit}' \
          "$TMP/run-$c-$r.txt")
      printf '%10s' "${v:--}"
    done
  done
  echo
done
printf '%-14s' mean
for c in $(seq 0 $((n - 1))); do
  for r in $(seq 1 "$ROUNDS"); do
    printf '%10s' "$(awk '/^suite .*: mean/ {print $4; exit}' "$TMP/run-$c-$r.txt")"
  done
done
echo
