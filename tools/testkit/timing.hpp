// A simple cold-L2 timing loop with CUDA events: before every iteration a buffer of twice the L2 size is
// zeroed, then the call is timed on its own. Medians over the timed iterations.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace gk_testkit {

struct TimingResult {
  double median_us = 0, min_us = 0, max_us = 0;
  int iterations = 0;
};

// `call` enqueues one operator call on the stream.
TimingResult time_cold_l2(const std::function<void(cudaStream_t)>& call, cudaStream_t stream, int warmup = 10,
                          int iterations = 50);

}  // namespace gk_testkit
