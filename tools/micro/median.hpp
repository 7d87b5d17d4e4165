// The median the microbenchmarks report (the upper one of an even count), of timings taken by value.
#pragma once

#include <algorithm>
#include <vector>

namespace gk_micro {

inline float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace gk_micro
