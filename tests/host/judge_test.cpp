// The official rule on the host (the device judge applies the same rule; the GPU tests compare the two).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "judge.hpp"

namespace {

using gk_testkit::judge_host;

TEST(Judge, ElementRuleAndRatio) {
  // atol 0.1, rtol 0.5: element i matches when |out - ref| <= 0.1 + 0.5 |ref|.
  const std::vector<float> ref{1, 2, 0, -4};
  const std::vector<float> out{1.55f, 2.9f, 0.2f, -4};  // errors 0.55 (<=0.6), 0.9 (<=1.1), 0.2 (>0.1), 0
  const auto j = judge_host(out.data(), ref.data(), 4, 0.1, 0.5);
  EXPECT_EQ(j.matched, 3);
  EXPECT_DOUBLE_EQ(j.matched_ratio(), 0.75);
  EXPECT_TRUE(j.passed(0.75));
  EXPECT_FALSE(j.passed(0.76));
  EXPECT_NEAR(j.max_abs_err, 0.9, 1e-6);
}

TEST(Judge, NanInfAndAllZeroNeverPass) {
  std::vector<float> ref(1000, 1.f), out(1000, 1.f);
  out[10] = NAN;
  auto j = judge_host(out.data(), ref.data(), 1000, 1.0, 1.0);
  EXPECT_EQ(j.non_finite, 1);
  EXPECT_FALSE(j.passed(0.99));  // 999/1000 matched, but a NaN fails the output
  EXPECT_EQ(j.verdict(0.99), "FAIL (NaN/Inf)");
  out[10] = INFINITY;
  EXPECT_FALSE(judge_host(out.data(), ref.data(), 1000, 1.0, 1.0).passed(0.0));
  std::vector<float> zeros(1000, 0.f);
  j = judge_host(zeros.data(), ref.data(), 1000, 2.0, 0.0);  // every element within atol
  EXPECT_EQ(j.matched, 1000);
  EXPECT_FALSE(j.passed(0.99));
  EXPECT_EQ(j.verdict(0.99), "FAIL (all zero)");
  EXPECT_FALSE(judge_host(out.data(), ref.data(), 0, 1.0, 1.0).passed(0.0));
}

TEST(Judge, NanInTheReferenceIsAMismatch) {
  const std::vector<double> ref{NAN, 1.0};
  const std::vector<float> out{1.f, 1.f};
  const auto j = judge_host(out.data(), ref.data(), 2, 10.0, 10.0);
  EXPECT_EQ(j.matched, 1);
}

}  // namespace
