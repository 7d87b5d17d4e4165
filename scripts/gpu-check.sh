#!/usr/bin/env bash
# One device call: build (unless a build was carried), host + GPU tests, compute-sanitizer on the small GPU
# tests, both suites checked and timed (simple cold-L2 loop), and optionally the fixtures. Prints a summary last.
#
#   scripts/gpu-check.sh [--fixtures] [--no-timing] [--quick] [--profile]
#
# --profile adds an Nsight Compute summary of the attention kernel on the largest 047 workload.
#
# Environment: GK_BUILD_DIR (default build), OUT (where logs go; default .out/).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${GK_BUILD_DIR:-build}
OUT=${OUT:-$PWD/.out}
mkdir -p "$OUT"
LOG="$OUT/gpu-check.log"
: > "$LOG"
FIXTURES=0 TIMING=1 QUICK=0 PROFILE=0
for a in "$@"; do
  case "$a" in
    --fixtures) FIXTURES=1 ;;
    --no-timing) TIMING=0 ;;
    --quick) QUICK=1 ;;
    --profile) PROFILE=1 ;;
    *) echo "unknown option $a" >&2; exit 2 ;;
  esac
done

declare -a SUMMARY
step() {  # step NAME COMMAND...
  local name=$1; shift
  local t0=$SECONDS
  echo "=== $name: $*" | tee -a "$LOG"
  timeout "${STEP_TIMEOUT:-300}" "$@" >> "$LOG" 2>&1
  local rc=$?
  [ $rc -eq 124 ] && echo "    (timed out after ${STEP_TIMEOUT:-300} s)" | tee -a "$LOG"
  SUMMARY+=("$(printf '%-34s %s (%ds)' "$name" "$([ $rc -eq 0 ] && echo PASS || echo "FAIL rc=$rc")" $((SECONDS - t0)))")
  return $rc
}

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv; } \
  >> "$LOG" 2>&1

if [ ! -x "$BUILD/bin/gk_gpu_tests" ]; then
  step configure cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
  step build ninja -C "$BUILD"
fi
export GK_FIXTURE_DIR=$PWD/tests/fixtures GK_CLI=$PWD/$BUILD/bin/gk
step "gk info" "$BUILD/bin/gk" info
step "host tests" "$BUILD/bin/gk_host_tests" --gtest_brief=1

FILTER='*'
[ $QUICK -eq 1 ] && FILTER='*Small*:*W047*B1_S128*:*W054*B1_S128*'
step "gpu tests" "$BUILD/bin/gk_gpu_tests" --gtest_filter="$FILTER" --gtest_output=xml:"$OUT/gpu-tests.xml"
# The attention kernel, the layer's projection path and the audio tf32 path are chosen by shape; run those tests
# once more with each pinned so every kernel sees every shape, mask and variant.
for k in wgmma mma; do
  step "gemma3 tests, attention=$k" env GK_ATTENTION_KERNEL=$k "$BUILD/bin/gk_gpu_tests" \
    --gtest_filter='*Gemma3*:*W047*:GpuTest.*' --gtest_brief=1
done
# The Hopper attention kernel with the GQA tails kept one tile per head (packed where the shape allows, by default).
step "gemma3 tests, attention=wgmma tail=separate" env GK_ATTENTION_KERNEL=wgmma GK_ATTENTION_TAIL=separate \
  "$BUILD/bin/gk_gpu_tests" --gtest_filter='*Gemma3*:*W047*:GpuTest.*' --gtest_brief=1
# The Hopper attention kernel's softmax against the running row maximum where it takes the fixed reference by default,
# and the fixed reference wherever it applies (additive mode's bounded blocks at every length, by default from 2048).
for sm in online fixed; do
  step "gemma3 tests, attention=wgmma softmax=$sm" env GK_ATTENTION_KERNEL=wgmma GK_ATTENTION_SOFTMAX=$sm \
    "$BUILD/bin/gk_gpu_tests" --gtest_filter='*Gemma3*:*W047*:GpuTest.*' --gtest_brief=1
done
# The Hopper attention kernel's output tiles by 16-byte stores instead of TMA stores.
step "gemma3 tests, attention=wgmma store=direct" env GK_ATTENTION_KERNEL=wgmma GK_ATTENTION_STORE=direct \
  "$BUILD/bin/gk_gpu_tests" --gtest_filter='*Gemma3*:*W047*:GpuTest.*' --gtest_brief=1
# The O projection's weights prefetched into L2 by the attention kernel (by default the split q|k|v kernel does it
# at one row tile), on both attention kernels.
for k in wgmma mma; do
  step "gemma3 tests, o prefetch=attention, attention=$k" env GK_O_PREFETCH=attention GK_ATTENTION_KERNEL=$k \
    "$BUILD/bin/gk_gpu_tests" --gtest_filter='*Gemma3*:*W047*' --gtest_brief=1
done
# fused: the fused kernels (the O projection too); split / persistent / pingpong: one fused kernel (pingpong: the
# persistent one on its ping-pong schedule) on every shape it takes.
# The k and v projections as two cuBLASLt GEMMs (by default one strided-batch GEMM, or one GEMM for q|k|v where the
# three weights lie back to back).
step "gemma3 tests, kv gemm=separate" env GK_KV_GEMM=separate "$BUILD/bin/gk_gpu_tests" \
  --gtest_filter='*Gemma3*:*W047*:GpuTest.*' --gtest_brief=1
for pp in fused cublas split persistent pingpong; do
  step "gemma3 tests, projections=$pp" env GK_PROJ_PATH=$pp "$BUILD/bin/gk_gpu_tests" \
    --gtest_filter='*Gemma3*:*W047*:GpuTest.*' --gtest_brief=1
done
for a in cublas split persistent; do
  step "audio tests, tf32 path=$a" env GK_AUDIO_TF32_PATH=$a "$BUILD/bin/gk_gpu_tests" \
    --gtest_filter='*Audio*tf32*:*AudioRounding*:*W054*' --gtest_brief=1
done
# The persistent kernel dealing whole units round-robin, and taking stream-K whatever the last round's fill (runs
# shorter than a unit, clusters without work); by default stream-K where the last round is at most 0.6 full.
for sk in off any-fill; do
  step "audio tests, tf32 stream-K $sk" env GK_AUDIO_TF32_PATH=persistent GK_AUDIO_STREAM_K=$sk \
    "$BUILD/bin/gk_gpu_tests" --gtest_filter='*Audio*tf32*:*AudioRounding*:*W054*' --gtest_brief=1
done
# v's weights rounded by a pass before the persistent kernel, by the kernel itself at every shape (by default only
# past one round of whole units), and by every CTA's fallback (head_gemm/weight_prep.cuh).
for vr in pass fused fused-fallback; do
  step "audio tests, tf32 v rounding $vr" env GK_AUDIO_TF32_PATH=persistent GK_AUDIO_V_ROUND=$vr \
    "$BUILD/bin/gk_gpu_tests" --gtest_filter='*Audio*tf32*:*AudioRounding*:*W054*:*AudioCrossCta*:*AudioNan*' \
    --gtest_brief=1
done
# v's weights rounded in registers (the kernel without rounding warps) at every split shape, and in shared memory
# at every one (by default: in registers where K is split).
for sv in registers smem; do
  step "audio tests, tf32 path=split, v weights in $sv" env GK_AUDIO_TF32_PATH=split GK_AUDIO_SPLIT_V=$sv \
    "$BUILD/bin/gk_gpu_tests" --gtest_filter='*Audio*tf32*:*AudioRounding*:*W054*:*AudioNan*:*AudioCrossCta*' \
    --gtest_brief=1
done
# The split kernel rounding both operands in shared memory (by default the activations arrive pre-rounded).
step "audio tests, tf32 path=split, activations rounded in smem" env GK_AUDIO_TF32_PATH=split GK_AUDIO_SPLIT_A=smem \
  "$BUILD/bin/gk_gpu_tests" --gtest_filter='*Audio*tf32*:*AudioRounding*:*W054*:*AudioNan*' --gtest_brief=1
# The 3xTF32 kernel splitting both operands in shared memory (by default the activations arrive split).
step "audio tests, exact path=fused, activations split in smem" env GK_AUDIO_EXACT_PATH=fused GK_AUDIO_EXACT_A=smem \
  "$BUILD/bin/gk_gpu_tests" --gtest_filter='*Audio*exact*:*AudioExactVsFp32*' --gtest_brief=1
for a in fused cublas; do
  step "audio tests, exact path=$a" env GK_AUDIO_EXACT_PATH=$a "$BUILD/bin/gk_gpu_tests" \
    --gtest_filter='*Audio*exact*:*AudioExactVsFp32*' --gtest_brief=1
done

if command -v compute-sanitizer > /dev/null; then
  step "memcheck (small tests)" compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$BUILD/bin/gk_gpu_tests" --gtest_filter='*Small*' --gtest_brief=1
  step "memcheck (small, attention=wgmma)" env GK_ATTENTION_KERNEL=wgmma compute-sanitizer --tool memcheck \
    --error-exitcode 1 "$BUILD/bin/gk_gpu_tests" --gtest_filter='Small/Gemma3Small.*' --gtest_brief=1
  # s1, s130 and the causal (S = 37) shapes run packed GQA tails on the Hopper kernel.
  step "racecheck (attention=wgmma, small)" env GK_ATTENTION_KERNEL=wgmma compute-sanitizer --tool racecheck \
    --error-exitcode 1 "$BUILD/bin/gk_gpu_tests" \
    --gtest_filter='Small/Gemma3Small.*causal_softcap:Small/Gemma3Small.*s130*:Small/Gemma3Small.s1' --gtest_brief=1
  step "racecheck (attention=mma, small)" env GK_ATTENTION_KERNEL=mma compute-sanitizer --tool racecheck \
    --error-exitcode 1 "$BUILD/bin/gk_gpu_tests" \
    --gtest_filter='Small/Gemma3Small.*causal_softcap:Small/Gemma3Small.*s130*' --gtest_brief=1
  step "racecheck (audio fused tf32, small)" compute-sanitizer --tool racecheck --error-exitcode 1 \
    "$BUILD/bin/gk_gpu_tests" --gtest_filter='*AudioSmall*tf32*:*AudioRounding*tf32_rows586*' --gtest_brief=1
  for pp in split persistent pingpong; do
    for tool in racecheck synccheck; do
      step "$tool (projections=$pp, small)" env GK_PROJ_PATH=$pp compute-sanitizer --tool $tool \
        --error-exitcode 1 "$BUILD/bin/gk_gpu_tests" --gtest_filter='Small/Gemma3Small.*' --gtest_brief=1
    done
  done
  for tool in memcheck racecheck synccheck; do
    # rows 2164: 108 units on 66 clusters, so the ring's phases run on across units, and the kernel rounds v's
    # weights itself (under a sanitizer's slowdown its hand-off may also time out into the fallback); rows 2048:
    # stream-K cuts units (the cross-CTA repeat and replay test too, but for racecheck, where it takes minutes)
    filter='*AudioSmall*tf32*:*AudioRounding*tf32_rows2164*:*AudioRounding*tf32_rows2048*'
    [ $tool != racecheck ] && filter="$filter:*AudioCrossCta*"
    step "$tool (audio persistent tf32)" env GK_AUDIO_TF32_PATH=persistent compute-sanitizer --tool $tool \
      --error-exitcode 1 "$BUILD/bin/gk_gpu_tests" --gtest_filter="$filter" --gtest_brief=1
  done
  step "synccheck (audio fused tf32, small)" compute-sanitizer --tool synccheck --error-exitcode 1 \
    "$BUILD/bin/gk_gpu_tests" --gtest_filter='*AudioSmall*tf32*:*AudioRounding*tf32_rows4*' --gtest_brief=1
  for tool in racecheck synccheck; do
    step "$tool (audio fused 3xTF32, small)" compute-sanitizer --tool $tool --error-exitcode 1 \
      "$BUILD/bin/gk_gpu_tests" --gtest_filter='*AudioSmall*exact*:*AudioRounding*exact_rows586*:*exact_s1_hidden192*' \
      --gtest_brief=1
  done
  for k in mma wgmma; do
    step "synccheck (attention=$k, small)" env GK_ATTENTION_KERNEL=$k compute-sanitizer --tool synccheck \
      --error-exitcode 1 "$BUILD/bin/gk_gpu_tests" --gtest_filter='Small/Gemma3Small.*s130*' --gtest_brief=1
  done
else
  SUMMARY+=("compute-sanitizer                  not found: SKIPPED")
fi

if [ $FIXTURES -eq 1 ]; then
  rm -rf "$OUT/fixtures"
  if step "make fixtures" python3 scripts/make_fixtures.py --out "$OUT/fixtures"; then
    step "fixture tests (new fixtures)" env GK_FIXTURE_DIR="$OUT/fixtures" "$BUILD/bin/gk_host_tests" \
      --gtest_filter='Fixtures.*'
    tar czf "$OUT/fixtures.tar.gz" -C "$OUT" fixtures && rm -rf "$OUT/fixtures"
  fi
fi

if [ $TIMING -eq 1 ]; then
  # Each suite in a process of its own and the CUPTI span alone, as the official harness runs and times each
  # problem: with --timer both the single-wave audio shapes read 1.5-3 us higher, and 054 timed right after 047 in
  # one process ~0.5 us higher (docs/perf-log.md v14). The events timer runs afterwards as a cross-check.
  for s in 047 054; do
    step "gk bench $s" "$BUILD/bin/gk" bench --suite $s --breakdown --json "$OUT/gk-bench-$s.json"
  done
  step "gk bench (both suites, events timer)" "$BUILD/bin/gk" bench --timer events
  step "gk bench 054 exact" "$BUILD/bin/gk" bench --suite 054 --precision exact
  # What the SOL-ExecBench 047 package runs: the suite's causal mask as a tensor (additive mode).
  step "gk bench 047 additive mask" "$BUILD/bin/gk" bench --suite 047 --mask additive --breakdown \
    --json "$OUT/gk-bench-additive.json"
fi

if [ $PROFILE -eq 1 ] && command -v ncu > /dev/null; then
  # Pipe utilization (tensor, XU: the special-function and conversion pipe, FMA, ALU), stall reasons and the
  # SASS lines that stall most, for the long-sequence attention.
  for shape in "1 8192" "4 2053"; do
    set -- $shape
    step "ncu attention ($1, $2)" ncu --clock-control none -k regex:attention_ --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section ComputeWorkloadAnalysis --section InstructionStats --section SchedulerStats \
      --section SourceCounters "$BUILD/bin/gk" run -b "$1" -s "$2" --seed 1
  done
fi

echo
grep -h "^\[ result" "$LOG" > "$OUT/results.txt"
echo "----- failing checks (all result lines: results.txt) -----"
grep -hE "FAIL|ERROR|Failure" "$LOG" | head -40
echo "----- suites -----"
grep -E "^(suite |B=)" "$LOG" | cut -c1-170
echo "----- summary -----"
printf '%s\n' "${SUMMARY[@]}"
grep -q "FAIL" <(printf '%s\n' "${SUMMARY[@]}") && exit 1
exit 0
