// The fixed softmax reference (src/attention/fixed_softmax.hpp): for every cap it accepts, a live key's
// probability exp2(c * t + bias), t in [-1, 1], stays inside [2^kLowest, 2^kHighest]; caps past the range, no
// softcap, and NaN are refused.
#include <gtest/gtest.h>

#include <cmath>

#include "attention/fixed_softmax.hpp"
#include "attention/params.hpp"

namespace {

using gk::gemma3::fixed_softmax_bias;
using gk::gemma3::kFixedSoftmaxHighest;
using gk::gemma3::kFixedSoftmaxLowest;
using gk::gemma3::kLog2e;

TEST(FixedSoftmax, ProbabilitiesStayNormalForEveryAcceptedCap) {
  int accepted = 0;
  for (float cap = 0.25f; cap <= 80.f; cap += 0.25f) {
    const float c = cap * kLog2e;
    float bias = 0.f;
    if (!fixed_softmax_bias(c, &bias)) {
      EXPECT_GT(2.f * c, kFixedSoftmaxHighest - kFixedSoftmaxLowest) << "cap " << cap;
      continue;
    }
    ++accepted;
    EXPECT_GE(-c + bias, kFixedSoftmaxLowest - 1e-3f) << "cap " << cap;
    EXPECT_LE(c + bias, kFixedSoftmaxHighest + 1e-3f) << "cap " << cap;
    // Small caps keep the largest possible probability at 1, as a running maximum would.
    if (2.f * c <= -kFixedSoftmaxLowest) {
      EXPECT_EQ(c + bias, 0.f) << "cap " << cap;
    }
  }
  EXPECT_EQ(accepted, 227);  // caps 0.25 ... 56.75
}

TEST(FixedSoftmax, SuiteCap) {
  float bias = 0.f;
  ASSERT_TRUE(fixed_softmax_bias(50.f * kLog2e, &bias));
  EXPECT_NEAR(-50.f * kLog2e + bias, -100.f, 1e-4f);
  EXPECT_NEAR(50.f * kLog2e + bias, 2.f * 50.f * kLog2e - 100.f, 1e-4f);  // 2^44.3
}

TEST(FixedSoftmax, RefusesWhatItCannotBound) {
  float bias = 0.f;
  EXPECT_FALSE(fixed_softmax_bias(0.f, &bias));  // no softcap
  EXPECT_FALSE(fixed_softmax_bias(-1.f, &bias));
  EXPECT_FALSE(fixed_softmax_bias(std::nanf(""), &bias));
  EXPECT_FALSE(fixed_softmax_bias(57.f * kLog2e, &bias));
  EXPECT_FALSE(fixed_softmax_bias(INFINITY, &bias));
}

}  // namespace
