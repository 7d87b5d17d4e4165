// The mask classification's liveness test (src/attention/mask_live.hpp: one comparison with a bf16 bound)
// against the arithmetic the attention applies to a mask value (attention_softmax.cuh: mask_logit2, the fp32
// product with log2(e) clamped at -FLT_MAX; a value is dead where that clamp gives -FLT_MAX), for every one of the
// 65536 bf16 bit patterns: NaNs, infinities, zeros of both signs, subnormals, the values around the bound. A value
// the classification called dead but the attention kept would drop a key tile it must visit.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "attention/mask_live.hpp"
#include "attention/params.hpp"

#include "bf16_bits.hpp"

namespace {

using gk_test::bf16_bits_to_float;

// mask_logit2 as the device computes it: an fp32 multiply (no contraction: nothing to add), then fmaxf, which
// returns the other operand for a NaN.
bool live_by_logit(float m) {
  volatile float product = m * gk::gemma3::kLog2e;  // volatile: keep it an fp32 operation
  const float clamped = std::fmax(static_cast<float>(product), -FLT_MAX);
  return clamped > -FLT_MAX;
}

TEST(MaskLive, MatchesTheAttentionsClampForEveryBf16Value) {
  int dead = 0, mismatches = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float m = bf16_bits_to_float(static_cast<uint16_t>(h));
    const bool expected = live_by_logit(m);
    if (gk::gemma3::mask_value_live(m) != expected) {
      if (++mismatches <= 10) ADD_FAILURE() << "bf16 0x" << std::hex << h << " (" << m << ")";
    }
    dead += expected ? 0 : 1;
  }
  EXPECT_EQ(mismatches, 0);
  // 254 NaNs, -inf, and the 78 negative finite values from 0xff32 to 0xff7f.
  EXPECT_EQ(dead, 254 + 1 + 78);
}

TEST(MaskLive, TheBoundIsTheLargestDeadValue) {
  const float bound = bf16_bits_to_float(gk::gemma3::kMaskDeadBoundBf16);
  EXPECT_EQ(bound, gk::gemma3::kMaskDeadBound);
  EXPECT_FALSE(live_by_logit(bound));
  EXPECT_TRUE(live_by_logit(bf16_bits_to_float(gk::gemma3::kMaskDeadBoundBf16 - 1)));  // the next bf16 toward zero
  EXPECT_TRUE(live_by_logit(bf16_bits_to_float(0x8000)));                             // -0
  EXPECT_TRUE(live_by_logit(bf16_bits_to_float(0x7f80)));                             // +inf
  EXPECT_FALSE(live_by_logit(bf16_bits_to_float(0xff80)));                            // -inf
  EXPECT_FALSE(live_by_logit(bf16_bits_to_float(0xff7f)));                            // the lowest finite bf16
}

}  // namespace
