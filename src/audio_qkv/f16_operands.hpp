// The audio operator's operands in fp16 with tf32's rounding (issue 38), as plain bit arithmetic shared by host and
// device. fp16 has tf32's 10-bit mantissa and a narrower exponent range: scaled by a power of two per row (of the
// activations, or of the weights: one output feature) so that the row's largest finite magnitude lies in
// [2^14, 2^15), every element's tf32 value (round to nearest, ties away, as the tf32 mode's tensor cores see it:
// device::round_tf32) is an fp16 value exactly, except where the scaled value falls below fp16's smallest normal
// (an element more than 2^28 below its row's maximum), whose error is then below 2^-25 in scaled units (2^-39 of
// the row's maximum). Powers of two divide back out of fp32 accumulators exactly (unscale).
//
// The exact mode's two terms: hi = fp16(x * 2^e), lo = fp16((x * 2^e - hi) * 2^11); hi + lo * 2^-11 keeps 22 of
// x's 24 significant bits (the residual is exact in fp32, and lo rounds it to 11 bits).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define GK_F16_HD __host__ __device__
#define GK_F16_NOINLINE __host__ __device__ __noinline__
#else
#define GK_F16_HD
#define GK_F16_NOINLINE
#endif

namespace gk::audio::f16 {

GK_F16_HD inline uint32_t bits_of(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  return b;
}
GK_F16_HD inline float float_of(uint32_t b) {
  float x;
  memcpy(&x, &b, 4);
  return x;
}

GK_F16_HD inline bool finite(uint32_t b) { return (b & 0x7f800000u) != 0x7f800000u; }

// floor(log2(a)) of a finite a > 0, denormals included.
GK_F16_HD inline int floor_log2(float a) {
  const uint32_t b = bits_of(a) & 0x7fffffffu;
  const int biased = static_cast<int>(b >> 23);
  if (biased != 0) return biased - 127;
  int top = 22;  // a denormal: m * 2^-149 with m < 2^23
  while (((b >> top) & 1u) == 0u) --top;
  return top - 149;
}

// The row's scale exponent from its largest finite magnitude: 14 - floor(log2(max)), so the maximum scales into
// [2^14, 2^15) (its tf32 rounding may reach 2^15, still below fp16's 65504). 0 for a row with no finite nonzero.
GK_F16_HD inline int scale_exponent(float max_finite_abs) {
  return max_finite_abs > 0.f && finite(bits_of(max_finite_abs)) ? 14 - floor_log2(max_finite_abs) : 0;
}

// x rounded to tf32 as the tf32 mode rounds it (ties away from zero, low 13 bits cleared; Inf kept, NaN made
// quiet), as an fp32 value.
GK_F16_HD inline float round_tf32(float x) {
  const uint32_t b = bits_of(x);
  if (!finite(b)) return x + x;
  return float_of((b + 0x1000u) & 0xffffe000u);
}

// 2^p for p in [-126, 127], a normal float.
GK_F16_HD inline float pow2(int p) { return float_of(static_cast<uint32_t>(p + 127) << 23); }

// ldexp_once's steps for a power of two outside a normal float's (out of line on the device: the kernels' per-element
// paths stay a multiply).
GK_F16_NOINLINE inline float ldexp_steps(float x, int e) {
  int rest = e;
  const int big = e > 0 ? 127 : -126;
  int steps = 0;
  while (rest > 127 || rest < -126) {
    rest -= big;
    ++steps;
  }
  x *= pow2(rest);
  for (int i = 0; i < steps; ++i) x *= pow2(big);
  return x;
}

// x * 2^e for a power of two of any size, rounded once: the largest step last, so every step before it is exact
// (an intermediate of the same sign of shift stays above the result by at least 2^(the remaining steps)).
GK_F16_HD inline float ldexp_once(float x, int e) {
  return e >= -126 && e <= 127 ? x * pow2(e) : ldexp_steps(x, e);
}

// fp32 to fp16 bits, round to nearest even, subnormals kept, overflow to Inf, NaN kept quiet (as 0x7e00 with its
// sign). The device converts in hardware (cvt.rn.f16.f32: the same rounding); the host spells it out.
GK_F16_HD inline uint16_t to_f16(float x) {
  const uint32_t b = bits_of(x);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t a = b & 0x7fffffffu;
#if defined(__CUDA_ARCH__)
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  return __half_as_ushort(__float2half_rn(x));
#else
  if (a >= 0x7f800000u) return static_cast<uint16_t>(sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
  const int exp = static_cast<int>(a >> 23) - 127;
  if (exp > 15) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 2^16: beyond 65504 even before rounding
  // The value's significand with its implicit bit (a denormal fp32 is far below fp16's range: it rounds to zero).
  if (exp < -25) return sign;
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;  // value = mant * 2^(exp - 23)
  // fp16 keeps 10 fraction bits for a normal (exp >= -14), fewer for a subnormal (a fixed quantum of 2^-24).
  const int drop = exp >= -14 ? 13 : 13 + (-14 - exp);  // low bits of mant below the fp16 quantum
  const uint32_t kept = mant >> drop, rem = mant & ((1u << drop) - 1u), half = 1u << (drop - 1);
  uint32_t q = kept + ((rem > half || (rem == half && (kept & 1u))) ? 1u : 0u);
  // q counts quanta: for a normal, q in [2^10, 2^11] (2^11: the rounding carried into the next binade).
  uint32_t h;
  if (exp >= -14) {
    int e16 = exp + 15;
    if (q == 0x800u) {
      q >>= 1;
      ++e16;
    }
    if (e16 >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
    h = (static_cast<uint32_t>(e16) << 10) | (q & 0x3ffu);
  } else {
    h = q;  // a subnormal's quanta; q == 2^10 is the smallest normal's bits, as it should be
  }
  return static_cast<uint16_t>(sign | h);
#endif
}

// fp16 bits to fp32 (exact).
GK_F16_HD inline float from_f16(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31) return float_of(sign | 0x7f800000u | (m << 13));
  if (e == 0) return float_of(sign | bits_of(static_cast<float>(m) * pow2(-24)));
  return float_of(sign | ((e + 112u) << 23) | (m << 13));
#endif
}

// The tf32 mode's operand x of a row scaled by 2^e, as fp16 bits.
GK_F16_HD inline uint16_t tf32_as_f16(float x, int e) { return to_f16(ldexp_once(round_tf32(x), e)); }

// The exact mode's two terms of x scaled by 2^e (see the top of the file).
struct Split {
  uint16_t hi, lo;
};
GK_F16_HD inline Split split(float x, int e) {
  const float s = ldexp_once(x, e);
  const uint16_t hi = to_f16(s);
  if (!finite(bits_of(s))) return {hi, 0};  // an infinite or NaN input: all of it in hi
  return {hi, to_f16((s - from_f16(hi)) * 2048.f)};
}

// An fp32 accumulator of products scaled by 2^e in total (row scale plus column scale) back at its own scale.
GK_F16_HD inline float unscale(float acc, int e) { return ldexp_once(acc, -e); }

}  // namespace gk::audio::f16
