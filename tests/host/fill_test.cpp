// The testkit's input recipes where a test's meaning depends on their exact values.
#include <gtest/gtest.h>

#include <vector>

#include "fill.hpp"

namespace {

using gk_testkit::FillSpec;

TEST(Fill, SignRampAlongTheSequence) {
  // Two sequences of three rows of four elements: row t negates the elements e with 3 e < 4 t, i.e. none, the
  // first two, the first three; the second sequence repeats the first.
  FillSpec f = gk_testkit::constant(2.f);
  f.ramp_row = 4;
  f.ramp_seq = 3;
  std::vector<float> v(24);
  gk_testkit::fill_host(f, v.data(), int64_t(v.size()), false);
  const std::vector<float> one_sequence = {2, 2, 2, 2, -2, -2, 2, 2, -2, -2, -2, 2};
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], one_sequence[i % 12]) << "element " << i;
}

TEST(Fill, NoRampByDefault) {
  std::vector<float> v(8);
  gk_testkit::fill_host(gk_testkit::constant(-3.f), v.data(), int64_t(v.size()), false);
  for (float x : v) EXPECT_EQ(x, -3.f);
}

}  // namespace
