// The audio operator's fp16 operand form (src/audio_qkv/f16_operands.hpp) against references computed another way:
// in double, by rounding to a quantum with std::nearbyint or floor, and fp16 values decoded with ldexp. Bit for bit
// where the form promises tf32's rounding, within its stated bound where it does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "audio_qkv/f16_operands.hpp"
#include "f16_operands_ref.hpp"
#include "f16_rows.hpp"

namespace {

namespace f16 = gk::audio::f16;

// A double rounded to float once (to nearest even), Inf past the largest float's rounding boundary: written out
// because converting an out-of-range double is undefined in C++.
float to_float(double d) {
  constexpr double kOverflow = 0x1.ffffffp127;  // FLT_MAX plus half its ulp: ties round to 2^128, i.e. Inf
  if (std::fabs(d) >= kOverflow) return static_cast<float>(std::copysign(INFINITY, d));
  return static_cast<float>(d);
}

// fp16 bits decoded independently of the code under test.
double decode(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  return sign * (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
}

// Round to nearest even fp16 value, in double: the quantum is 2^(max(floor(log2|x|), -14) - 10).
double ref_f16(double x) {
  if (std::isnan(x)) return x;
  const double a = std::fabs(x);
  if (a == 0.0) return x;
  const int e = std::max(static_cast<int>(std::floor(std::log2(a))), -14);
  const double q = std::ldexp(1.0, e - 10);
  const double r = std::nearbyint(a / q) * q;  // the default rounding mode: to nearest, ties to even
  return std::copysign(r >= 65520.0 ? INFINITY : r, x);
}

// tf32 as the tf32 mode rounds: to a quantum of 2^(max(floor(log2|x|), -126) - 10), ties away from zero (fp32
// denormals keep the normals' smallest quantum, as rounding the raw bits at bit 13 does).
double ref_tf32(float x) {
  if (!std::isfinite(x)) return x;
  const double a = std::fabs(static_cast<double>(x));
  if (a == 0.0) return x;
  const int e = std::max(static_cast<int>(std::floor(std::log2(a))), -126);
  const double q = std::ldexp(1.0, e - 10);
  const double r = std::floor(a / q + 0.5) * q;
  return to_float(std::copysign(r, static_cast<double>(x)));  // representable, or past FLT_MAX: Inf
}

float random_float(std::mt19937& rng, int min_exp, int max_exp) {
  std::uniform_int_distribution<int> exp(min_exp, max_exp);
  std::uniform_int_distribution<uint32_t> mant(0, (1u << 23) - 1);
  std::bernoulli_distribution neg(0.5);
  const float x = std::ldexp(1.0f + static_cast<float>(mant(rng)) / 8388608.0f, exp(rng));
  return neg(rng) ? -x : x;
}

TEST(F16Operands, ConversionRoundTripsEveryFp16Value) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const double v = decode(static_cast<uint16_t>(h));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(f16::from_f16(static_cast<uint16_t>(h))));
      EXPECT_EQ(f16::to_f16(f16::from_f16(static_cast<uint16_t>(h))) & 0x7c00, 0x7c00);
      continue;
    }
    EXPECT_EQ(static_cast<double>(f16::from_f16(static_cast<uint16_t>(h))), v) << std::hex << h;
    EXPECT_EQ(f16::to_f16(static_cast<float>(v)), h) << std::hex << h;
  }
}

TEST(F16Operands, ConversionRoundsEveryMidpointToEven) {
  // Between each pair of neighbouring positive fp16 values (and past the largest), the midpoint and its fp32
  // neighbours on either side.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double lo = decode(static_cast<uint16_t>(h)), hi = h + 1 < 0x7c00 ? decode(static_cast<uint16_t>(h + 1)) : 65536.0;
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: fp16 midpoints have at most 12 significant bits
    for (const float x : {mid, std::nextafter(mid, 0.f), std::nextafter(mid, INFINITY)}) {
      for (const float s : {x, -x}) {
        const double want = ref_f16(s);
        EXPECT_EQ(decode(f16::to_f16(s)), want) << s;
      }
    }
  }
}

TEST(F16Operands, ConversionOfEveryExponentRange) {
  std::mt19937 rng(7);
  for (int e = -149; e <= 127; ++e) {
    for (int i = 0; i < 200; ++i) {
      const float x = e >= -126 ? random_float(rng, e, e)
                                : std::ldexp(static_cast<float>(1 + rng() % ((1u << (e + 149)) - 0u)), -149);
      const double want = ref_f16(x);
      const double got = decode(f16::to_f16(x));
      EXPECT_TRUE(got == want || (std::isinf(got) && std::isinf(want))) << x << " got " << got << " want " << want;
    }
  }
  EXPECT_EQ(f16::to_f16(INFINITY), 0x7c00);
  EXPECT_EQ(f16::to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(f16::to_f16(std::numeric_limits<float>::quiet_NaN()) & 0x7e00, 0x7e00);
  EXPECT_EQ(f16::to_f16(-0.f), 0x8000);
  EXPECT_EQ(f16::to_f16(65504.f), 0x7bff);
  EXPECT_EQ(f16::to_f16(65519.99f), 0x7bff);
  EXPECT_EQ(f16::to_f16(65520.f), 0x7c00);
}

TEST(F16Operands, ScaleExponentPutsTheRowMaximumBelow2To15) {
  std::mt19937 rng(11);
  for (int e = -149; e <= 127; ++e) {
    const float m = e >= -126 ? random_float(rng, e, e) : std::ldexp(1.f, e);
    const int s = f16::scale_exponent(std::fabs(m));
    const double scaled = std::ldexp(std::fabs(static_cast<double>(m)), s);
    EXPECT_GE(scaled, 16384.0) << m;
    EXPECT_LT(scaled, 32768.0) << m;
    EXPECT_LE(std::ldexp(ref_tf32(std::fabs(m)), s), 32768.0) << m;  // its tf32 rounding may reach 2^15
  }
  EXPECT_EQ(f16::scale_exponent(0.f), 0);
  EXPECT_EQ(f16::scale_exponent(INFINITY), 0);
  EXPECT_EQ(f16::scale_exponent(std::numeric_limits<float>::quiet_NaN()), 0);
}

// A row's elements as the fp16 form gives them, against tf32's rounding: bit-identical in value wherever the scaled
// value is a normal fp16, else within 2^-25 in scaled units.
void check_row(const std::vector<float>& row) {
  float max = 0.f;
  for (const float x : row) {
    if (std::isfinite(x)) max = std::max(max, std::fabs(x));
  }
  const int e = f16::scale_exponent(max);
  for (const float x : row) {
    const double want = ref_tf32(x);
    const uint16_t h = f16::tf32_as_f16(x, e);
    const double got = std::ldexp(decode(h), -e);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    if (std::isinf(want)) {  // an infinite input, or a finite one whose tf32 rounding overflows
      EXPECT_EQ(got, want) << x;
      continue;
    }
    if (std::fabs(std::ldexp(want, e)) >= std::ldexp(1.0, -14)) {
      EXPECT_EQ(got, want) << x << " in a row of max " << max;
    } else {
      EXPECT_LE(std::fabs(got - want), std::ldexp(1.0, -25 - e)) << x << " in a row of max " << max;
      EXPECT_LE(std::fabs(got - want), std::ldexp(static_cast<double>(max), -39)) << x;
    }
  }
}

TEST(F16Operands, RowsAcrossExponentRangesKeepTf32Rounding) {
  std::mt19937 rng(13);
  for (int top = -100; top <= 100; top += 5) {
    for (int span : {0, 8, 28, 40, 80}) {
      std::vector<float> row(257);
      for (float& x : row) x = random_float(rng, top - span, top);
      check_row(row);
    }
  }
  // Rows of fp32 denormals, a row from 2^-100 to 2^100, zeros, a single huge element, Inf and NaN among finite values.
  std::vector<float> denormals, wide, zeros(64, 0.f), huge(64, 1e-3f);
  for (int i = 1; i < 2000; i += 7) denormals.push_back(std::ldexp(static_cast<float>(i), -149));
  for (int e = -100; e <= 100; ++e) wide.push_back(random_float(rng, e, e));
  zeros[3] = -0.f;
  huge[17] = 3.0e38f;
  check_row(denormals);
  check_row(wide);
  check_row(zeros);
  check_row(huge);
  std::vector<float> special = {1.f, -2.5f, INFINITY, 7.f, -INFINITY, std::numeric_limits<float>::quiet_NaN(), 0.25f,
                                std::numeric_limits<float>::max()};
  check_row(special);
  for (const float z : zeros) EXPECT_EQ(f16::tf32_as_f16(z, f16::scale_exponent(0.f)) & 0x7fff, 0);
}

TEST(F16Operands, UnscaleIsOneRounding) {
  std::mt19937 rng(17);
  for (int e = -300; e <= 300; e += 3) {
    for (int i = 0; i < 50; ++i) {
      const float acc = random_float(rng, -40, 60);
      const float want = to_float(std::ldexp(static_cast<double>(acc), -e));  // one rounding, to nearest even
      const float got = f16::unscale(acc, e);
      EXPECT_EQ(f16::bits_of(got), f16::bits_of(want)) << acc << " e " << e;
    }
  }
}

TEST(F16Operands, TwoTermSplitKeeps22Bits) {
  std::mt19937 rng(19);
  for (int top = -60; top <= 60; top += 4) {
    std::vector<float> row(129);
    for (float& x : row) x = random_float(rng, top - 10, top);
    float max = 0.f;
    for (const float x : row) max = std::max(max, std::fabs(x));
    const int e = f16::scale_exponent(max);
    for (const float x : row) {
      const f16::Split s = f16::split(x, e);
      const double scaled = std::ldexp(static_cast<double>(x), e);
      const double back = decode(s.hi) + decode(s.lo) / 2048.0;
      // hi is x rounded to fp16; lo rounds the residual to 11 bits: within 2^-22 of |x| (scaled), or the residual's
      // fp16 quantum where lo is subnormal.
      EXPECT_EQ(decode(s.hi), ref_f16(scaled)) << x;
      EXPECT_LE(std::fabs(back - scaled), std::max(std::ldexp(std::fabs(scaled), -22), std::ldexp(1.0, -36))) << x;
    }
  }
  const f16::Split inf = f16::split(INFINITY, 0);
  EXPECT_EQ(inf.hi, 0x7c00);
  EXPECT_EQ(inf.lo, 0);
}

}  // namespace

namespace {

// The exact mode's arithmetic on the host: the two terms of each operand, the big products and the cross products
// accumulated apart in fp32 (fused multiply-adds, in K order), their sum unscaled; against fp32 dot products (the
// same FMA chain on the unsplit values), both judged by relative L2 against a double-precision truth. What the
// kernel's tensor cores accumulate may differ in order and internal width; this checks the method's own error.
struct DotErrors {
  double split, fp32;
};

DotErrors dot_errors(const std::vector<std::vector<float>>& xs, const std::vector<std::vector<float>>& ws) {
  double e_split = 0, e_fp32 = 0, norm = 0;
  for (const auto& x : xs) {
    float mx = 0.f;
    for (const float v : x) mx = std::max(mx, std::fabs(v));
    const int ex = f16::scale_exponent(mx);
    for (const auto& w : ws) {
      float mw = 0.f;
      for (const float v : w) mw = std::max(mw, std::fabs(v));
      const int ew = f16::scale_exponent(mw);
      double truth = 0;
      float big = 0.f, cross = 0.f, plain = 0.f;
      for (size_t k = 0; k < x.size(); ++k) {
        truth += static_cast<double>(x[k]) * w[k];
        plain = std::fma(x[k], w[k], plain);
        const f16::Split a = f16::split(x[k], ex), b = f16::split(w[k], ew);
        const float ah = f16::from_f16(a.hi), al = f16::from_f16(a.lo), bh = f16::from_f16(b.hi), bl = f16::from_f16(b.lo);
        big = std::fma(ah, bh, big);
        cross = std::fma(ah, bl, std::fma(al, bh, cross));
      }
      const float got = f16::unscale(big + cross * (1.f / 2048.f), ex + ew);
      e_split += (got - truth) * (got - truth);
      e_fp32 += (plain - truth) * (plain - truth);
      norm += truth * truth;
    }
  }
  return {std::sqrt(e_split / norm), std::sqrt(e_fp32 / norm)};
}

TEST(F16Operands, ExactModeTermsStayWithinTwiceFp32Error) {
  std::mt19937 rng(29);
  std::normal_distribution<float> normal(0.f, 1.f);
  constexpr int kK = 1024, kRows = 24, kCols = 24;  // the suite's hidden size
  const auto make = [&](int n, float spread_exp) {
    std::vector<std::vector<float>> m(n, std::vector<float>(kK));
    std::uniform_real_distribution<float> exponent(-spread_exp, spread_exp);
    for (auto& row : m) {
      for (float& v : row) v = normal(rng) * std::exp2(exponent(rng));
    }
    return m;
  };
  // Plain normal values, then magnitudes spread over 2^±8 and 2^±20 within each row and column.
  for (const float spread : {0.f, 8.f, 20.f}) {
    const DotErrors e = dot_errors(make(kRows, spread), make(kCols, spread));
    EXPECT_LE(e.split, 2 * e.fp32) << "spread 2^" << spread << ": two fp16 terms " << e.split << ", fp32 " << e.fp32;
    EXPECT_GT(e.fp32, 0.0);
  }
}

}  // namespace

namespace {

// The per-row steps of a conversion to this form (the row's largest finite magnitude, its scale exponent, each
// element's terms) on the host, against the plain reference of reference/cpu/f16_operands.cpp over the testkit's
// adversarial rows.
TEST(F16Operands, RowStepsMatchThePlainReferenceOnAdversarialRows) {
  constexpr int kRows = 200, kK = 96;
  const std::vector<float> rows = gk_testkit::f16_adversarial_rows(kRows, kK, 7);
  int64_t bad = 0;
  for (int r = 0; r < kRows; ++r) {
    const float* x = rows.data() + r * kK;
    float mx = 0.f;
    for (int i = 0; i < kK; ++i) {
      if (std::isfinite(x[i])) mx = std::max(mx, std::fabs(x[i]));
    }
    const int e = f16::scale_exponent(mx);
    ASSERT_EQ(e, gk_test::ref_scale_exponent(x, kK)) << "row " << r;
    for (int i = 0; i < kK; ++i) {
      uint16_t hi, lo;
      gk_test::ref_split(x[i], e, &hi, &lo);
      const f16::Split s = f16::split(x[i], e);
      const uint16_t one = gk_test::ref_tf32_f16(x[i], e), got = f16::tf32_as_f16(x[i], e);
      if (!gk_test::ref_same_f16(got, one) || !gk_test::ref_same_f16(s.hi, hi) || !gk_test::ref_same_f16(s.lo, lo)) {
        if (++bad <= 5) {
          ADD_FAILURE() << "row " << r << " col " << i << " x " << x[i] << " e " << e << ": one term " << got
                        << " want " << one << ", two terms " << s.hi << "/" << s.lo << " want " << hi << "/" << lo;
        }
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace
