// The official timer's attribution (tools/testkit/attribution.cpp): GPU work belongs to a call when its correlation id
// is an API call that started within the call's host window; the span runs from its first start to its last end.
#include <gtest/gtest.h>

#include <stdexcept>

#include "attribution.hpp"

namespace {

using gk_testkit::ApiCall;
using gk_testkit::attributed_spans_us;
using gk_testkit::GpuActivity;

TEST(Attribution, SpansTheCallsOwnWorkOnly) {
  // Window 0 [100, 200]: API calls 1 and 2 (the scrub, launched at 90, is not the call's). Window 1 [300, 400]: 3.
  const std::vector<ApiCall> api = {{90, 7}, {110, 1}, {150, 2}, {160, 99}, {310, 3}, {410, 4}};
  const std::vector<GpuActivity> gpu = {
      {120, 5000, "scrub", 7},  {5000, 6000, "k1", 1}, {6500, 9000, "k2", 2}, {6600, 6700, "k2b", 2},
      {9500, 11500, "k3", 3},   {20000, 21000, "late", 4}};
  const auto us = attributed_spans_us(gpu, api, {{100, 200}, {300, 400}}, 0);
  ASSERT_EQ(us.size(), 2u);
  EXPECT_DOUBLE_EQ(us[0], 4.0);  // k1's start to k2's end: the gap between them counts
  EXPECT_DOUBLE_EQ(us[1], 2.0);
  EXPECT_EQ(attributed_spans_us(gpu, api, {{100, 200}, {300, 400}}, 1).size(), 1u);  // warm-up windows skipped
}

TEST(Attribution, AWindowWithoutGpuWorkIsAnError) {
  const std::vector<ApiCall> api = {{110, 1}};
  const std::vector<GpuActivity> gpu = {{500, 600, "k", 1}};
  EXPECT_THROW(attributed_spans_us(gpu, api, {{300, 400}}, 0), std::runtime_error);
}

}  // namespace
