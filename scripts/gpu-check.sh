#!/usr/bin/env bash
# One device call: build (unless a build was carried), host + GPU tests (the GPU tests run every pinned plan on the
# suites in one process: tests/gpu/plans_gpu_test.cpp), the adversarial variants again with each attention kernel
# pinned, compute-sanitizer on the small GPU tests, and both suites checked and timed. Prints a summary last.
#
#   scripts/gpu-check.sh [--quick] [--no-tests] [--no-timing] [--no-sanitizer] [--baseline DIR] [--fixtures] [--profile]
#                        [--audio-only]
#
# --baseline DIR: DIR holds another build's bin/gk and lib/libgk.so.0 (e.g. the previous release); both suites are
#   then timed with it and with this build alternately (A B B A) in this call, for a same-machine comparison.
# --profile adds an Nsight Compute summary of the attention kernel on two long 047 workloads, and the audio
#   operator's small rows: Nsight Compute, sweeps over hidden and heads, the dirty-scrub reads, pinned routes.
# --audio-only: the timing and profile steps of the audio operator alone (054 and its small shapes), for a short call.
# Pins go through GK_OVERRIDES (docs/dispatch.md lists the keys).
# Environment: GK_BUILD_DIR (default build), OUT (where logs go; default .out/).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${GK_BUILD_DIR:-build}
OUT=${OUT:-$PWD/.out}
mkdir -p "$OUT"
LOG="$OUT/gpu-check.log"
: > "$LOG"
FIXTURES=0 TIMING=1 QUICK=0 PROFILE=0 SANITIZE=1 TESTS=1 AUDIO_ONLY=0 BASELINE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --fixtures) FIXTURES=1 ;;
    --no-timing) TIMING=0 ;;
    --no-sanitizer) SANITIZE=0 ;;
    --no-tests) TESTS=0 ;;
    --quick) QUICK=1 ;;
    --profile) PROFILE=1 ;;
    --audio-only) AUDIO_ONLY=1 ;;
    --baseline) BASELINE=$(realpath "$2"); shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

declare -a SUMMARY
step() {  # step NAME COMMAND...
  local name=$1; shift
  local t0=$SECONDS
  echo "=== $name: $*" | tee -a "$LOG"
  timeout "${STEP_TIMEOUT:-300}" "$@" >> "$LOG" 2>&1
  local rc=$?
  [ $rc -eq 124 ] && echo "    (timed out after ${STEP_TIMEOUT:-300} s)" | tee -a "$LOG"
  SUMMARY+=("$(printf '%-44s %s (%ds)' "$name" "$([ $rc -eq 0 ] && echo PASS || echo "FAIL rc=$rc")" $((SECONDS - t0)))")
  return $rc
}
pinned() {  # pinned NAME OVERRIDES COMMAND...
  local name=$1 spec=$2; shift 2
  step "$name [$spec]" env GK_OVERRIDES="$spec" "$@"
}

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv; } \
  >> "$LOG" 2>&1

if [ ! -x "$BUILD/bin/gk_gpu_tests" ]; then
  step configure cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
  step build ninja -C "$BUILD"
fi
export GK_FIXTURE_DIR=$PWD/tests/fixtures GK_CLI=$PWD/$BUILD/bin/gk
T="$BUILD/bin/gk_gpu_tests"
step "gk info" "$BUILD/bin/gk" info
step "host tests" "$BUILD/bin/gk_host_tests" --gtest_brief=1

FILTER='*'
[ $QUICK -eq 1 ] && FILTER='*Small*:*W047*B1_S128*:*W054*B1_S128*'
if [ $TESTS -eq 1 ]; then
  # The Hugging Face oracle builds models and generate() compiles its decode step: more than the default step limit.
  STEP_TIMEOUT=600 step "python gpu tests (torch ops, HF oracle)" env GK_LIBRARY="$PWD/$BUILD/lib/libgk.so.0" \
    PYTHONPATH="$PWD/python" python3 -m pytest -q -p no:cacheprovider -m gpu tests/python
  STEP_TIMEOUT=900 step "gpu tests (every pinned plan included)" "$T" --gtest_filter="$FILTER" --gtest_brief=1 \
    --gtest_output=xml:"$OUT/gpu-tests.xml"
  # The adversarial variants (saturated softcap, masks with -inf and dead rows, padded tails, odd alignments) on each
  # attention kernel and softmax form.
  for spec in attention.kernel=sm80 attention.kernel=sm90 attention.kernel=sm90,attention.softmax=running \
              attention.kernel=sm90,attention.tail=separate,attention.store=direct qkv=cublas,kv_gemm=separate; do
    pinned "gemma3 variants" "$spec" "$T" --gtest_filter='*Gemma3Variants*:*Gemma3Small*:GpuTest.*' --gtest_brief=1
  done
  for spec in audio.tf32=persistent audio.tf32=splitk,audio.activations=smem audio.tf32=persistent,audio.v_round=kernel; do
    pinned "audio variants" "$spec" "$T" --gtest_filter='*AudioVariants*:*AudioRounding*:*AudioNan*:*AudioCrossCta*' \
      --gtest_brief=1
  done
fi

if [ $SANITIZE -eq 1 ] && command -v compute-sanitizer > /dev/null; then
  # cs TOOL FILTER: the arguments of one sanitizer run (step runs a command, not a shell function).
  cs() { CS=(compute-sanitizer --tool "$1" --error-exitcode 1 "$T" --gtest_filter="$2" --gtest_brief=1); }
  cs memcheck '*Small*'
  step "memcheck (small tests)" "${CS[@]}"
  # s1, s130 and the causal (S = 37) shapes run packed GQA tails on the sm90 kernel; head_dim256* its 64-key form.
  for k in sm90 sm80; do
    for tool in racecheck synccheck; do
      cs $tool  'Small/Gemma3Small.*causal_softcap:Small/Gemma3Small.*s130*:Small/Gemma3Small.s1:Small/Gemma3Small.*head_dim256*'
      pinned "$tool (attention, small)" "attention.kernel=$k" "${CS[@]}"
    done
  done
  cs memcheck 'Small/Gemma3Small.*'
  pinned "memcheck (attention, small)" attention.kernel=sm90 "${CS[@]}"
  # The cached calls: the head scatter, the decode kernel and its combine (S = 1 and 3 steps), the sm80 kernel's
  # cached form (the chunked prefill steps), the split calls.
  for tool in memcheck racecheck synccheck; do
    cs $tool 'CachedLayer.*'
    step "$tool (key/value cache, small)" "${CS[@]}"
  done
  # The few-row projection (decode-sized calls): head_dim 128 with a K split, 256, and a K of one set per CTA.
  for tool in memcheck racecheck synccheck; do
    cs $tool 'FewRows/*suite_b1_s9*:FewRows/*12b*:FewRows/*short_k*'
    STEP_TIMEOUT=600 step "$tool (few-row projection)" "${CS[@]}"
  done
  for tool in racecheck synccheck; do
    cs $tool 'Small/Gemma3Small.*'
    pinned "$tool (split-K projection, small)" qkv=splitk "${CS[@]}"
    cs $tool '*AudioSmall*tf32*:*AudioRounding*tf32_rows586*'
    pinned "$tool (audio split-K tf32, small)" audio.tf32=splitk "${CS[@]}"
    cs $tool  '*AudioSmall*exact*:*AudioRounding*exact_rows586*:*exact_s1_hidden192*'
    pinned "$tool (audio tf32x3, small)" audio.exact=tf32x3 "${CS[@]}"
  done
  for tool in memcheck racecheck synccheck; do
    # rows 2164: the ring's phases run on across units and the kernel rounds v's weights itself; rows 2048: stream-K
    # cuts units (the cross-CTA repeat and replay test too, but for racecheck, where it takes minutes).
    filter='*AudioSmall*tf32*:*AudioRounding*tf32_rows2164*:*AudioRounding*tf32_rows2048*'
    [ $tool != racecheck ] && filter="$filter:*AudioCrossCta*"
    cs $tool "$filter"
    pinned "$tool (audio persistent tf32)" audio.tf32=persistent "${CS[@]}"
  done
  # The fp16 ping-pong kernel (turns at the mainloop on named barriers; clusters of two multicasting the weights):
  # the default form and the unclustered one-head form on one call of 1000 rows (8 row tiles, the last cut short),
  # checked against the CPU reference so that only the library's kernels run under the tool.
  for spec in audio.tf32=f16 audio.tf32=f16,audio.f16_tile=head,audio.f16_multicast=off; do
    for tool in memcheck racecheck synccheck; do
      pinned "$tool (audio fp16 ping-pong)" "$spec" compute-sanitizer --tool $tool --error-exitcode 1 \
        "$BUILD/bin/gk" run --op audio -b 1 -s 1000 --rounds 1 --reference cpu
    done
  done
elif [ $SANITIZE -eq 1 ]; then
  SUMMARY+=("compute-sanitizer                            not found: SKIPPED")
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
  # Each suite in a process of its own and the CUPTI span alone, as the official harness times each problem
  # (docs/perf-log.md v14).
  bench() {  # bench LABEL GK_BINARY SUITE [options]
    local label=$1 gk=$2 suite=$3; shift 3
    mkdir -p "$OUT/bench"
    step "gk bench $suite ($label)" "$gk" bench --suite "$suite" --json "$OUT/bench/gk-bench-$suite-$label.json" "$@"
  }
  SUITES="047 054"
  [ $AUDIO_ONLY -eq 1 ] && SUITES=054
  for s in $SUITES; do
    if [ -n "$BASELINE" ]; then
      bench new "$BUILD/bin/gk" $s --breakdown
      bench base "$BASELINE/bin/gk" $s --rounds 0
      bench base2 "$BASELINE/bin/gk" $s --rounds 0
      bench new2 "$BUILD/bin/gk" $s --rounds 0
    else
      bench new "$BUILD/bin/gk" $s --breakdown
    fi
  done
  step "gk bench 054 exact" "$BUILD/bin/gk" bench --suite 054 --precision exact
  # What the SOL-ExecBench 047 package runs: the suite's causal mask as a tensor (additive mode).
  [ $AUDIO_ONLY -eq 1 ] || step "gk bench 047 additive mask" "$BUILD/bin/gk" bench --suite 047 --mask additive \
    --json "$OUT/bench/gk-bench-additive.json"
  # The released models' layers (what this build supports of them; sliding windows on the local ones).
  [ $QUICK -eq 1 ] || [ $AUDIO_ONLY -eq 1 ] || bench new "$BUILD/bin/gk" gemma3 --breakdown
  # One decode step after a key/value cache (the cached call: decode kernel, split-K q|k|v, O projection).
  [ $QUICK -eq 1 ] || [ $AUDIO_ONLY -eq 1 ] || bench new "$BUILD/bin/gk" decode --breakdown
fi

if [ $PROFILE -eq 1 ] && command -v ncu > /dev/null; then
  ATTN_SHAPES=("1 8192" "4 2053")
  [ $AUDIO_ONLY -eq 1 ] && ATTN_SHAPES=()
  for shape in "${ATTN_SHAPES[@]}"; do
    set -- $shape
    step "ncu attention ($1, $2)" ncu --clock-control none -k regex:attention_ --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section ComputeWorkloadAnalysis --section InstructionStats --section SchedulerStats \
      --section SourceCounters "$BUILD/bin/gk" run -b "$1" -s "$2" --seed 1
  done
  # The audio operator's small shapes (issue 38: within 2.5x of their memory floor): the split-K tf32 kernel at
  # (1, 128) and (2, 128), K split 4 and 2, where a per-call constant and not the bytes is most of the time (perf
  # log v59, v60; from 257 rows the fp16 route runs).
  for shape in "1 128" "2 128"; do
    set -- $shape
    step "ncu audio ($1, $2)" ncu --clock-control none -k regex:audio_qkv --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis --section SchedulerStats \
      "$BUILD/bin/gk" run --op audio -b "$1" -s "$2" --seed 1 --reference cpu
  done
  # The same at (1, 128) without ncu's cache flush, so replays start on warm caches (code, descriptors, the weights in
  # L2 too): the duration's drop bounds from above what the protocol's cold caches cost this kernel.
  step "ncu audio (1, 128), caches kept" ncu --clock-control none --cache-control none -k regex:audio_qkv \
    --launch-count 1 --section SpeedOfLight "$BUILD/bin/gk" run --op audio -b 1 -s 128 --seed 1 --reference cpu
  # The SMs' active cycles in that kernel (busiest, mean, sum over the occupied SMs) against its span: how long no
  # SM is active at the launch's two ends, and how far the CTAs' ends spread (v60).
  for shape in "1 128" "2 128"; do
    set -- $shape
    step "ncu audio ($1, $2), cycles by SM" ncu --clock-control none -k regex:audio_qkv --launch-count 1 \
      --metrics gpc__cycles_elapsed.max,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.sum \
      "$BUILD/bin/gk" run --op audio -b "$1" -s "$2" --seed 1 --reference cpu
  done
  # The kernel without its rounding warps' pacing: the activations rounded by a pass (and where K is split v's
  # weights in registers, no rounding warps at all); the breakdown gives the kernel's span apart from the pass's.
  for spec in audio.activations=prepass audio.activations=prepass,audio.v_weights=smem; do
    for shape in "1 128" "2 128"; do
      set -- $shape
      pinned "gk bench audio ($1, $2)" "$spec" "$BUILD/bin/gk" bench --op audio -b "$1" -s "$2" --breakdown
    done
  done
  # Between 256 and 512 rows (none in the suite): the fp16 route, which the planner takes from 257 rows where its
  # GEMM is the ping-pong kernel (no K split), against the split-K tf32 kernel pinned (perf log v60).
  for shape in "1 257" "1 320" "3 128"; do
    set -- $shape
    step "gk bench audio ($1, $2)" "$BUILD/bin/gk" bench --op audio -b "$1" -s "$2" --breakdown
    pinned "gk bench audio ($1, $2)" audio.tf32=splitk "$BUILD/bin/gk" bench --op audio -b "$1" -s "$2" --breakdown
  done
  # What a plain read of the small rows' bytes takes after the protocol's scrub, which leaves L2 full of modified
  # lines (a floor no kernel under the protocol beats; CUDA events: the zero-byte line is the launch's and timer's).
  step "dirty-scrub reads" "$BUILD/bin/gk_micro_stream"
  # The split-K tf32 kernel at 128 rows timed as the suite times it, over K (2 to 32 K-blocks a CTA at a K split of
  # 4) and over heads (24 to 96 CTAs): a time linear in K-blocks a CTA with a large constant says per-call costs; one
  # that shrinks with fewer CTAs at the same K says the weight stream.
  mkdir -p "$OUT/bench"
  for shape in "--hidden 256" "--hidden 512" "--hidden 2048" "--hidden 4096" "--heads 2" "--heads 4"; do
    step "gk bench audio (1, 128) $shape" "$BUILD/bin/gk" bench --op audio -b 1 -s 128 $shape --breakdown \
      --json "$OUT/bench/gk-bench-audio-128-${shape// /}.json"
  done
  # The fp16 route on every row (the planner takes it from 2048 rows, and from 257 where its GEMM needs no K split;
  # perf log v60): whether the rows left on tf32 still lose with it.
  pinned "gk bench 054, fp16 route everywhere" audio.tf32=f16 "$BUILD/bin/gk" bench --suite 054 --breakdown \
    --json "$OUT/bench/gk-bench-054-f16-everywhere.json"
fi

echo
[ -d "$OUT/bench" ] && tar czf "$OUT/bench.tar.gz" -C "$OUT" bench && rm -rf "$OUT/bench"
grep -h "^\[ result" "$LOG" > "$OUT/results.txt"
echo "----- failing checks (all result lines: results.txt) -----"
grep -hE "FAIL|ERROR|Failure" "$LOG" | head -40
echo "----- suites -----"
grep -E "^suite " "$LOG" | cut -c1-170
echo "----- summary -----"
printf '%s\n' "${SUMMARY[@]}"
grep -q "FAIL" <(printf '%s\n' "${SUMMARY[@]}") && exit 1
exit 0
