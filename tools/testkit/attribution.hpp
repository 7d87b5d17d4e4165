// SOL-ExecBench's attribution of GPU work to a timed call, as plain C++ (the timing loop feeds it CUPTI's records; the
// host tests feed it made-up ones): the GPU activities whose correlation ids belong to runtime or driver API calls that
// started within the call's host window [first, second]; the call's time is their span, first start to last end.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "cupti_recorder.hpp"

namespace gk_testkit {

// Per window from `skip` on, the GPU activities attributed to it (in no particular order).
std::vector<std::vector<GpuActivity>> attributed_activities(const std::vector<GpuActivity>& gpu, std::vector<ApiCall> api,
                                                            const std::vector<std::pair<uint64_t, uint64_t>>& windows,
                                                            size_t skip);
// Per window from `skip` on, the span in microseconds. Throws std::runtime_error for a window with no GPU activity.
std::vector<double> attributed_spans_us(const std::vector<GpuActivity>& gpu, std::vector<ApiCall> api,
                                        const std::vector<std::pair<uint64_t, uint64_t>>& windows, size_t skip);

}  // namespace gk_testkit
