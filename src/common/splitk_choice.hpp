// The K split of a split-K kernel (a cluster of CTAs along grid z sharing one output tile's K loop), chosen from
// the grid the output tiles alone would give so that a few tiles still spread the weight stream over most SMs.
// Plain C++: planners call it with the residency the handle queried (DeviceInfo), host tests with made-up devices.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "common/device_props.hpp"

namespace gk::detail {

// The largest of `candidates` (largest first) whose grid of tiles x split CTAs fits in one wave - within the SMs and
// within the clusters of that size that can be resident at once (`resident[size]`: clusters stay within a GPC, so
// fewer fit than SMs / size) - and leaves each CTA at least two K-blocks (with `even_k`, the same number). 1 when
// the tiles alone fill half the SMs.
inline int choose_splitk(int sms, const int (&resident)[kMaxClusterSplit + 1], int64_t tiles, int k_blocks,
                         std::initializer_list<int> candidates, bool even_k) {
  if (2 * tiles > sms) return 1;
  for (int s : candidates) {
    if (s < 2 || s > kMaxClusterSplit || tiles * s > sms || k_blocks / s < 2 || (even_k && k_blocks % s != 0)) continue;
    if (tiles <= resident[s]) return s;
  }
  return 1;
}

}  // namespace gk::detail
