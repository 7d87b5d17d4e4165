// Timing loops for one operator call, following SOL-ExecBench's protocol: before every iteration a buffer of
// twice the L2 size is zeroed; the call may rotate among input sets (the iteration index is passed in);
// warm-up iterations are discarded; medians over the timed ones. Two timers, usable together on the same
// iterations: CUDA events around the call, and CUPTI activity spans (first GPU activity the call launched to the
// end of its last one, so host launch overhead before the first kernel does not count, gaps between kernels do).
// The scrub is a kernel of its own, launched ahead of the call without a host sync in between, so the call's
// launches queue up behind it as they would in a serving loop. Beside the GPU timers, the host time of the call
// itself (what the thread spends enqueueing it: argument checks, plan lookups, tensor-map encoding, launches),
// which bounds how fast a serving loop can issue layers when the GPU is not the bottleneck. With the CUPTI timer on,
// CUPTI's own cost per launch is part of it; the events timer alone gives the call's.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

#include "clock_sampler.hpp"

namespace gk_testkit {

struct TimingStats {
  bool valid = false;
  double median_us = 0, min_us = 0, max_us = 0;
};

// One GPU activity of the call, by its position in launch order: medians over the timed iterations of its start
// relative to the call's first activity and of its duration. The gap before activity i is
// start_us[i] - (start_us[i-1] + duration_us[i-1]) when the medians come from the same iterations.
struct ActivityStat {
  std::string name;
  double start_us = 0, duration_us = 0;
};

struct TimingResult {
  int iterations = 0;
  TimingStats events, cupti;
  TimingStats host;  // wall time of the call on the host, over the timed iterations
  std::vector<ActivityStat> activities;  // filled by the CUPTI and official timers
  ClockStats clocks;                      // over the timed iterations, where NVML is available
};

struct TimingOptions {
  int warmup = 10;
  int iterations = 50;
  bool events = true;
  bool cupti = false;
  // SOL-ExecBench's own method instead of the kernel-only CUPTI timer (result in TimingResult::cupti): runtime and
  // driver API records enabled too, host timestamps around the call, a synchronize after it, and the call's GPU work
  // found through the correlation ids of the API calls that started between the two timestamps. API tracing slows
  // every API call, so gaps the call's enqueueing leaves between its kernels count as they do in the harness.
  bool official = false;
};

// `call` enqueues one operator call on the stream; its int argument is the iteration index.
TimingResult time_call(const std::function<void(cudaStream_t, int)>& call, cudaStream_t stream,
                       const TimingOptions& options);

// The simple loop used by `gk run --time`: events only, one input set.
TimingResult time_cold_l2(const std::function<void(cudaStream_t)>& call, cudaStream_t stream, int warmup = 10,
                          int iterations = 50);

}  // namespace gk_testkit
