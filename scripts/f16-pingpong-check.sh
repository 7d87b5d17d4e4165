#!/usr/bin/env bash
# The gate of branch wip/f16-pingpong (perf log v55), one device call: smoke runs of each pinned form (a hang stops
# the call), the 054 suite alternating the default plan with the ping-pong pins, the audio GPU tests, memcheck, ncu.
# Needs the branch built and packed into build-p1 (bin/gk, bin/gk_gpu_tests, lib/libgk.so.0).
set -uo pipefail
R=${OUT:-/tmp/o}; mkdir -p "$R"; O=/tmp/oraw; rm -rf "$O"; mkdir -p "$O"
# Everything goes to $O; after each step $R/all.tgz is remade, so a call cut short still returns what ran.
pack() { tar czf /tmp/all.tgz -C "$O" . && mv /tmp/all.tgz "$R/all.tgz"; }
P=build-p1
T0=$SECONDS; CAP=${CAP:-480}
export GK_FIXTURE_DIR=$PWD/tests/fixtures GK_CLI=$PWD/$P/bin/gk
run() {
  local n=$1 t=$2; shift 2
  local left=$((CAP - (SECONDS - T0)))
  if [ $left -lt 10 ]; then echo "SKIP $n (cap)" | tee -a "$O/summary.txt"; return; fi
  [ $t -gt $left ] && t=$left
  local s=$SECONDS
  timeout $t "$@" > "$O/$n.log" 2>&1; local rc=$?
  echo "$n rc=$rc $((SECONDS - s))s" | tee -a "$O/summary.txt"
  pack
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv > "$O/gpu.txt" 2>&1; cat "$O/gpu.txt"
# Smoke first: a hang in a pinned form stops the call early (its logs come back).
for g in "audio.f16_schedule=pingpong,audio.f16_tile=head" "audio.f16_schedule=pingpong,audio.f16_tile=pair" "audio.f16_schedule=pingpong,audio.f16_tile=head,audio.f16_multicast=weights" "audio.f16_schedule=pingpong,audio.f16_tile=pair,audio.f16_multicast=weights"; do
  n="smoke-${g//[=,.]/_}"
  run "$n" 20 env GK_OVERRIDES=$g $P/bin/gk run --op audio -b 2 -s 2050 --rounds 1
  if grep -q "$n rc=124" "$O/summary.txt"; then
    echo "hang: stop" | tee -a "$O/summary.txt"
    pack; exit 0
  fi
done
B="$P/bin/gk bench --suite 054 --rounds 1"
run bd-def 30 $P/bin/gk bench --op audio -b 64 -s 128 --rounds 0 --breakdown
run bd-pph 30 env GK_OVERRIDES=audio.f16_schedule=pingpong,audio.f16_tile=head $P/bin/gk bench --op audio -b 64 -s 128 --rounds 0 --breakdown
run bd-pphm 30 env GK_OVERRIDES=audio.f16_schedule=pingpong,audio.f16_tile=head,audio.f16_multicast=weights $P/bin/gk bench --op audio -b 64 -s 128 --rounds 0 --breakdown
run bd-ppp 30 env GK_OVERRIDES=audio.f16_schedule=pingpong,audio.f16_tile=pair $P/bin/gk bench --op audio -b 64 -s 128 --rounds 0 --breakdown
for r in 1 2; do
  run def-r$r 60 $B --json "$O/def-r$r.json"
  run pp-r$r 60 env GK_OVERRIDES=audio.f16_schedule=pingpong $B --json "$O/pp-r$r.json"
  run pph-r$r 60 env GK_OVERRIDES=audio.f16_schedule=pingpong,audio.f16_tile=head $B --json "$O/pph-r$r.json"
  run ppp-r$r 60 env GK_OVERRIDES=audio.f16_schedule=pingpong,audio.f16_tile=pair $B --json "$O/ppp-r$r.json"
  run pphm-r$r 60 env GK_OVERRIDES=audio.f16_schedule=pingpong,audio.f16_tile=head,audio.f16_multicast=weights $B --json "$O/pphm-r$r.json"
  run pppm-r$r 60 env GK_OVERRIDES=audio.f16_schedule=pingpong,audio.f16_tile=pair,audio.f16_multicast=weights $B --json "$O/pppm-r$r.json"
done
run cublas 60 python3 scripts/cublas_f16_gemm.py --out "$O/cublas-054.json"
run audio-tests 120 $P/bin/gk_gpu_tests --gtest_brief=1 --gtest_filter='*Audio*:*audio*'
run allf16hm 60 env GK_OVERRIDES=audio.tf32=f16,audio.f16_schedule=pingpong,audio.f16_tile=head,audio.f16_multicast=weights $B --json "$O/allf16hm.json"
run allf16h 60 env GK_OVERRIDES=audio.tf32=f16,audio.f16_schedule=pingpong,audio.f16_tile=head $B --json "$O/allf16h.json"
run allf16p 60 env GK_OVERRIDES=audio.tf32=f16,audio.f16_schedule=pingpong,audio.f16_tile=pair $B --json "$O/allf16p.json"
run allf16c 60 env GK_OVERRIDES=audio.tf32=f16 $B --json "$O/allf16c.json"
run memcheck 60 env GK_OVERRIDES=audio.f16_schedule=pingpong,audio.f16_tile=pair compute-sanitizer --tool memcheck $P/bin/gk run --op audio -b 2 -s 2050 --rounds 1
run memcheck-m 60 env GK_OVERRIDES=audio.f16_schedule=pingpong,audio.f16_tile=head,audio.f16_multicast=weights compute-sanitizer --tool memcheck $P/bin/gk run --op audio -b 1 -s 4097 --rounds 1
M="gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum.per_second,sm__throughput.avg.pct_of_peak_sustained_elapsed"
for g in "audio.f16_tile=pair" "audio.f16_schedule=pingpong,audio.f16_tile=head" "audio.f16_schedule=pingpong,audio.f16_tile=head,audio.f16_multicast=weights"; do
  run "ncu-${g//[=,.]/_}" 45 env GK_OVERRIDES=$g ncu --kernel-name regex:audio_qkv_f16 --launch-count 1 --metrics $M \
    $P/bin/gk run --suite 054 --workload 64,128 --rounds 1
done
run gpu-tests 200 $P/bin/gk_gpu_tests --gtest_brief=1 --gtest_filter='-*Audio*:*audio*'
echo "total $((SECONDS - T0))s" | tee -a "$O/summary.txt"
pack
