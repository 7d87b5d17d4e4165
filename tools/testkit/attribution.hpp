// SOL-ExecBench's attribution of GPU work to a timed call, as plain C++ (the timing loop feeds it CUPTI's records; the
// host tests feed it made-up ones): the GPU activities whose correlation ids belong to runtime or driver API calls that
// started within the call's host window [first, second]; the call's time is their span, first start to last end.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "cupti_recorder.hpp"

namespace gk_testkit {

// Per window, the GPU activities attributed to it (in no particular order).
std::vector<std::vector<GpuActivity>> attributed_activities(const std::vector<GpuActivity>& gpu, std::vector<ApiCall> api,
                                                            const std::vector<std::pair<uint64_t, uint64_t>>& windows);
// Per window from `skip` on, the span of its activities in microseconds, first start to last end. Throws
// std::runtime_error for a window with no GPU activity.
std::vector<double> activity_spans_us(const std::vector<std::vector<GpuActivity>>& per_window, size_t skip);
// activity_spans_us of every window's attributed_activities.
std::vector<double> attributed_spans_us(const std::vector<GpuActivity>& gpu, std::vector<ApiCall> api,
                                        const std::vector<std::pair<uint64_t, uint64_t>>& windows, size_t skip);

}  // namespace gk_testkit
