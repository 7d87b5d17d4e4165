// Overflow-checked size arithmetic for validating user-supplied dimensions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace gk::detail {

// Multiplies non-negative factors; returns false when the product exceeds `limit` (which also keeps it
// inside int64), or a factor is negative.
inline bool checked_product(const int64_t* factors, size_t n, int64_t limit, int64_t* out) {
  int64_t p = 1;
  for (size_t i = 0; i < n; ++i) {
    const int64_t f = factors[i];
    if (f < 0) return false;
    if (f != 0 && p > limit / f) return false;
    p *= f;
  }
  *out = p;
  return true;
}

inline bool checked_product(std::initializer_list<int64_t> factors, int64_t limit, int64_t* out) {
  return checked_product(factors.begin(), factors.size(), limit, out);
}

}  // namespace gk::detail
