// bf16 bit patterns as the fp32 values they widen to (exact: bf16 is fp32's upper half), for the host tests that
// sweep every bf16 value.
#pragma once

#include <cstdint>
#include <cstring>

namespace gk_test {

inline float bf16_bits_to_float(uint16_t h) {
  const uint32_t w = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

}  // namespace gk_test
