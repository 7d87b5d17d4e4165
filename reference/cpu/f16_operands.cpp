#include "f16_operands_ref.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace gk_test {

namespace {

uint16_t f16_bits(double v) {
  const _Float16 h = static_cast<_Float16>(static_cast<float>(v));  // v is exact in float where fp16 can hold it
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

// x to tf32: 10 fraction bits of fp32's encoding kept, ties away from zero (a denormal's quantum is 2^-136).
double tf32(float x) {
  if (!std::isfinite(x) || x == 0.f) return x;
  const int ex = std::max(std::ilogb(x), -126);
  const double q = std::ldexp(1.0, ex - 10);
  const double r = std::round(static_cast<double>(x) / q) * q;  // std::round: halves away from zero
  // A value that rounds up to 2^128 is fp32's infinity, as the tf32 mode's rounding (in fp32 bits) makes it.
  return std::fabs(r) >= std::ldexp(1.0, 128) ? std::copysign(INFINITY, r) : r;
}

}  // namespace

int ref_scale_exponent(const float* row, int k) {
  double mx = 0.0;
  for (int i = 0; i < k; ++i) {
    if (std::isfinite(row[i])) mx = std::max(mx, std::fabs(static_cast<double>(row[i])));
  }
  return mx > 0.0 ? 14 - std::ilogb(mx) : 0;
}

uint16_t ref_tf32_f16(float x, int e) {
  const double t = tf32(x);
  if (!std::isfinite(t)) return f16_bits(t);
  return f16_bits(std::ldexp(t, e));
}

void ref_split(float x, int e, uint16_t* hi, uint16_t* lo) {
  if (!std::isfinite(x)) {
    *hi = f16_bits(x);
    *lo = 0;
    return;
  }
  const double s = std::ldexp(static_cast<double>(x), e);
  *hi = f16_bits(s);
  _Float16 h;
  std::memcpy(&h, hi, 2);
  const double rest = (s - static_cast<double>(h)) * 2048.0;
  *lo = std::isfinite(static_cast<double>(h)) ? f16_bits(rest) : 0;
}

bool ref_same_f16(uint16_t a, uint16_t b) {
  const auto nan = [](uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; };
  return a == b || (nan(a) && nan(b)) || ((a & 0x7fffu) == 0 && (b & 0x7fffu) == 0);
}

}  // namespace gk_test
