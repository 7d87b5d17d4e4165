// The norm/RoPE pass (src/gemma3_attention/norm_rope.cu) computes RoPE on bf16 pairs and relies on two identities
// of bf16 arithmetic to stay bit-identical to the layer's definition (each product rounded to bf16, then their
// fp32 sum rounded to bf16): for bf16 a and b,
//   1. the fp32 product a * b is exact, so rounding it to bf16 is the single rounding of the exact product;
//   2. the fp32 sum a + b rounded to bf16 equals the single rounding of the exact sum (no double-rounding error).
// Checked here with a bf16 rounding written from the definition (round half to even from an exact double), over
// every finite bf16 a against sampled b of every exponent distance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

namespace {

float bf16_bits_to_float(uint16_t h) {
  const uint32_t w = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

// Round-to-nearest-even of an fp32 value to bf16, on its bits (what __float2bfloat16_rn does for finite values).
uint16_t float_to_bf16_rn(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  const uint32_t lsb = (w >> 16) & 1u;
  return static_cast<uint16_t>((w + 0x7fffu + lsb) >> 16);
}

// The bf16 nearest to an exact double x (ties to even), from the definition: 8 significant bits at x's binade.
// Only for x whose bf16 rounding is a finite normal number or zero, which the samples below keep to.
double double_to_bf16_value(double x) {
  if (x == 0.0) return x;
  int e;
  std::frexp(x, &e);                       // |x| in [2^(e-1), 2^e)
  const double ulp = std::ldexp(1.0, e - 8);  // 8 significant bits
  const double q = x / ulp;                // exact: a power-of-two scaling
  double r = std::floor(q);
  const double frac = q - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  return r * ulp;
}

bool usable(uint16_t h) {
  const int exp = (h >> 7) & 0xff;
  return exp >= 64 && exp <= 190;  // normal, far from under- and overflow (products and sums stay normal)
}

}  // namespace

TEST(Bf16Rounding, ProductAndSumRoundOnceFromFp32) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> any(0, 0xffff);
  int64_t checked = 0;
  for (uint32_t ha = 0; ha <= 0xffff; ++ha) {
    if (!usable(static_cast<uint16_t>(ha))) continue;
    const float a = bf16_bits_to_float(static_cast<uint16_t>(ha));
    for (int j = 0; j < 48; ++j) {
      // Half the partners within 24 binades of a (where the sum's rounding is delicate), half anywhere usable.
      uint16_t hb;
      do {
        hb = static_cast<uint16_t>(any(rng));
        if (j % 2 == 0) {
          const int ea = (ha >> 7) & 0xff, d = int(any(rng) % 49) - 24;
          hb = static_cast<uint16_t>((hb & 0x807f) | (uint32_t(ea + d) << 7));
        }
      } while (!usable(hb));
      const float b = bf16_bits_to_float(hb);
      const double exact_prod = double(a) * double(b);  // exact: 8 x 8 significant bits
      ASSERT_EQ(double(a * b), exact_prod) << "fp32 product not exact for " << a << " * " << b;
      ASSERT_EQ(double(bf16_bits_to_float(float_to_bf16_rn(a * b))), double_to_bf16_value(exact_prod));
      // Exact in double while the exponents differ by at most 45; beyond that both sides round to the larger.
      const double exact_sum = double(a) + double(b);
      ASSERT_EQ(double(bf16_bits_to_float(float_to_bf16_rn(a + b))), double_to_bf16_value(exact_sum))
          << "double rounding differs for " << a << " + " << b;
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000000);
}
