#!/usr/bin/env bash
# One device call for branch wip/f16-pp-default: all GPU tests, then the 054 suite with the new defaults against the
# cooperative pin (the old default) alternately, the exact suite, memcheck. Needs build-p1 (build-kv/pack.sh).
set -uo pipefail
R=${OUT:-/tmp/o}; mkdir -p "$R"; O=/tmp/oraw; rm -rf "$O"; mkdir -p "$O"
pack() { tar czf /tmp/all.tgz -C "$O" . && mv /tmp/all.tgz "$R/all.tgz"; }
P=build-p1; T0=$SECONDS; CAP=${CAP:-300}
export GK_FIXTURE_DIR=$PWD/tests/fixtures GK_CLI=$PWD/$P/bin/gk
run() {
  local n=$1 t=$2; shift 2
  local left=$((CAP - (SECONDS - T0)))
  if [ $left -lt 10 ]; then echo "SKIP $n (cap)" | tee -a "$O/summary.txt"; return; fi
  [ $t -gt $left ] && t=$left
  local s=$SECONDS
  timeout $t "$@" > "$O/$n.log" 2>&1; local rc=$?
  echo "$n rc=$rc $((SECONDS - s))s" | tee -a "$O/summary.txt"; pack
}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > "$O/gpu.txt" 2>&1; cat "$O/gpu.txt"
run smoke 30 $P/bin/gk run --op audio -b 2 -s 2050 --rounds 1
B="$P/bin/gk bench --suite 054 --rounds 1"
CO=audio.f16_schedule=cooperative,audio.f16_multicast=off
run def-r1 60 $B --json "$O/def-r1.json"
run coop-r1 60 env GK_OVERRIDES=$CO $B --json "$O/coop-r1.json"
run audio-tests 60 $P/bin/gk_gpu_tests --gtest_brief=1 --gtest_filter='*Audio*:*audio*'
run memcheck 60 compute-sanitizer --tool memcheck $P/bin/gk run --op audio -b 2 -s 2050 --rounds 1
run def-r2 60 $B --json "$O/def-r2.json"
run coop-r2 60 env GK_OVERRIDES=$CO $B --json "$O/coop-r2.json"
run exact 90 $B --precision exact --json "$O/exact.json"
run gpu-tests 200 $P/bin/gk_gpu_tests --gtest_brief=1 --gtest_filter='-*Audio*:*audio*'
echo "total $((SECONDS - T0))s" | tee -a "$O/summary.txt"; pack
