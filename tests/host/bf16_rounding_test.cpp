// The norm/RoPE pass (src/projection/norm_rope.cu) computes RoPE on bf16 pairs with one rounding per
// operation and relies on two identities to stay bit-identical to the layer's definition (each product rounded
// to bf16, then their fp32 sum rounded to bf16): for bf16 a and b,
//   1. round_bf16(fp32(a * b)) is the single round-to-nearest-even of the exact product, and
//   2. round_bf16(fp32(a + b)) is the single round-to-nearest-even of the exact sum.
// Checked here bit for bit (signed zeros included) against a rounding written from the definition, for every
// non-NaN bf16 a against a spread of b over every class (zeros, subnormals, normals, infinities). This checks the
// arithmetic, not the device instructions; the GPU tests check the pass's outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "bf16_bits.hpp"

namespace {

using gk_test::bf16_bits_to_float;

// Round-to-nearest-even of an fp32 value to bf16 on its bits (__float2bfloat16_rn for non-NaN values).
uint16_t fp32_to_bf16_rn(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  return static_cast<uint16_t>((w + 0x7fffu + ((w >> 16) & 1u)) >> 16);
}

// The bf16 nearest to the value x holds exactly (ties to even), from the definition: 8 significant bits in x's
// binade, a fixed 2^-133 step below the normal range, infinity past the largest finite value.
uint16_t exact_to_bf16_rn(double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double m = std::fabs(x);
  if (m == 0.0) return sign;
  if (std::isinf(m)) return sign | 0x7f80;
  int e;
  std::frexp(m, &e);  // m in [2^(e-1), 2^e)
  const double ulp = std::ldexp(1.0, std::max(e - 8, -133));
  const double q = m / ulp;  // exact: a power-of-two scaling of a value with few significant bits
  double r = std::floor(q);
  const double frac = q - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  const double v = r * ulp;
  if (v >= std::ldexp(1.0, 128)) return sign | 0x7f80;  // past 0x7f7f: overflow
  float f = static_cast<float>(v);  // exact: v has at most 8 significant bits
  return sign | fp32_to_bf16_rn(f);
}

// The single rounding of the exact sum of two finite bf16 values. Their sum is exact in double while the
// exponents differ by at most 44 (8 + 44 < 53 significant bits); past that the smaller one is below 2^-36 of
// the larger, far under half the larger's bf16 ulp and never a tie, so the sum rounds to the larger.
uint16_t exact_sum_to_bf16_rn(uint16_t ha, uint16_t hb) {
  const double a = bf16_bits_to_float(ha), b = bf16_bits_to_float(hb);
  if (a == 0.0 || b == 0.0 || std::fabs(std::ilogb(a) - std::ilogb(b)) <= 44) return exact_to_bf16_rn(a + b);
  return std::fabs(a) > std::fabs(b) ? ha : hb;
}

bool is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0; }
bool is_inf(uint16_t h) { return (h & 0x7fff) == 0x7f80; }

}  // namespace

TEST(Bf16Rounding, ProductAndSumRoundOnceFromFp32) {
  std::vector<uint16_t> partners;
  for (uint32_t h = 0; h <= 0xffff; h += 97) partners.push_back(static_cast<uint16_t>(h));  // every class
  for (uint16_t h : {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x3f80}) {
    partners.push_back(h);
  }
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> any(0, 0xffff);
  int64_t checked = 0;
  for (uint32_t ua = 0; ua <= 0xffff; ++ua) {
    const uint16_t ha = static_cast<uint16_t>(ua);
    if (is_nan(ha)) continue;
    std::vector<uint16_t> bs = partners;
    for (int j = 0; j < 32; ++j) {  // and partners within a few binades of a, where the sum rounds delicately
      const int ea = (ha >> 7) & 0xff, eb = std::min(254, std::max(0, ea + int(any(rng) % 21) - 10));
      bs.push_back(static_cast<uint16_t>((any(rng) & 0x807f) | (uint32_t(eb) << 7)));
    }
    const float a = bf16_bits_to_float(ha);
    for (uint16_t hb : bs) {
      if (is_nan(hb)) continue;
      const float b = bf16_bits_to_float(hb);
      // inf * 0 and inf - inf are NaN both ways; the identities are about numbers.
      if (!((is_inf(ha) && b == 0.f) || (is_inf(hb) && a == 0.f))) {
        ASSERT_EQ(fp32_to_bf16_rn(a * b), exact_to_bf16_rn(double(a) * double(b)))  // exact in double
            << std::hex << "product of 0x" << ha << " and 0x" << hb;
      }
      if (is_inf(ha) || is_inf(hb)) continue;
      ASSERT_EQ(fp32_to_bf16_rn(a + b), exact_sum_to_bf16_rn(ha, hb)) << std::hex << "sum of 0x" << ha << " and 0x"
                                                                          << hb;
      ++checked;
    }
  }
  EXPECT_GT(checked, 40000000);
}
