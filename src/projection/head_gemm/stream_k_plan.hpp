// Host side of stream-K for the persistent head-tiled GEMM (stream_k.cuh): which units go to stream-K and how
// long each cluster's run is. Plain C++, so the host tests check the plan's invariants.
#pragma once

#include <cstdint>

namespace gk::head_gemm {

// Where stream-K starts (unit0) and each cluster's run of K-blocks (0: whole units round-robin throughout), for
// `units` units of `k_blocks` (even) K-blocks on `clusters` clusters. Taken where the last round of whole units is at
// most 0.6 full, over the last round and the one before: past that fill, and over every unit, it measured slower
// (docs/perf-log.md v13, v14). Runs are even (the tf32 loop's K-block pairs) and none may start inside a unit and end
// inside it too, so that a unit meets at most two runs, cut once at the start of the second (stream_k.cuh).
struct StreamKPlan {
  int unit0 = 0, run = 0;
};
inline StreamKPlan plan_stream_k(int units, int k_blocks, int clusters) {
  StreamKPlan plan;
  if (clusters < 2 || units < 1 || k_blocks < 2 || k_blocks % 2 != 0) return plan;
  const int last = units % clusters, full = units / clusters;
  if (last == 0 || full < 1 || 5 * last > 3 * clusters) return plan;
  const int unit0 = full >= 1 ? (full - 1) * clusters : 0;
  const int64_t total = int64_t(units - unit0) * k_blocks;
  int64_t run = (total + clusters - 1) / clusters;
  run += run % 2;
  if (run > INT32_MAX) return plan;
  for (int64_t start = 0; start < total; start += run) {
    const int64_t s = start % k_blocks;
    if (s != 0 && s + run < k_blocks) return plan;
  }
  plan.unit0 = unit0;
  plan.run = static_cast<int>(run);
  return plan;
}

}  // namespace gk::head_gemm
