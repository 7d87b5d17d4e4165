// Shared fixture for the GPU tests: skips with the reason when no CUDA device is present, owns one handle and
// one stream, and hands out fresh seeds (GK_TEST_SEED fixes the first one for a reproducible run).
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "gk/gk.hpp"
#include "judge.hpp"

namespace gk_test {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override;
  static gk_handle_t handle();
  static cudaStream_t stream();
  static uint64_t next_seed();
};

template <typename P>
class GpuParamTest : public GpuTest, public ::testing::WithParamInterface<P> {};

// Prints one result line that the device script collects for the report.
void report(const std::string& what, uint64_t seed, const gk_testkit::Judgement& j, double required);

}  // namespace gk_test

#define GK_ASSERT_OK(expr)                          \
  do {                                              \
    const ::gk::Status s_ = (expr);                 \
    ASSERT_TRUE(s_.ok()) << s_.message();           \
  } while (0)
