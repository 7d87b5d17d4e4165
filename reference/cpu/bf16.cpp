#include <cmath>
#include <cstring>

#include "reference.hpp"

namespace gk_ref {

uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep it a quiet NaN
  const uint32_t rounding = 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float bf16_from_bits(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

float round_bf16(float x) { return bf16_from_bits(bf16_bits(x)); }

}  // namespace gk_ref
