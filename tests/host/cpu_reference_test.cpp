// Known-answer tests of the CPU reference: inputs small enough that every expected value is computed by hand in
// the comments.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "reference.hpp"

namespace {

using gk_ref::round_bf16;

TEST(Bf16Rounding, NearestEvenAndSpecials) {
  EXPECT_EQ(round_bf16(1.0f), 1.0f);
  // bf16 keeps 7 mantissa bits: the ulp at 1 is 2^-7. 1 + 2^-8 is a tie and goes to the even neighbour 1.
  EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.f, -8)), 1.0f);
  // 1 + 3*2^-8 ties between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(round_bf16(1.0f + 3 * std::ldexp(1.f, -8)), 1.0f + std::ldexp(1.f, -6));
  EXPECT_EQ(round_bf16(-2.5f), -2.5f);
  EXPECT_TRUE(std::isnan(round_bf16(NAN)));
  EXPECT_TRUE(std::isinf(round_bf16(INFINITY)));
  EXPECT_EQ(gk_ref::bf16_bits(1.0f), 0x3f80);
  EXPECT_FLOAT_EQ(gk_ref::bf16_from_bits(0xff7f), -3.3895313892515355e38f);
}

// Two tokens, D = 2, one head, identity projections. Tokens are e0 and e1.
// RMSNorm of [1, 0]: mean(x^2) = 0.5, so x * rsqrt(0.5) = [1.41421, 0] -> bf16 1.4140625.
// cos = 1, sin = 0 leave RoPE as the identity. q_i = k_i = 1.4140625 e_i, v_i = e_i.
// Scores: q_i.k_i = 1.99957 -> bf16 2.0, times D^-0.5 -> 1.41421 -> 1.4140625; q_i.k_j (i != j) = 0.
struct TinyLayer {
  gk_ref::Gemma3Dims dims{1, 2, 2, 1, 1, 2, 0.f, 1e-6f, 1.f, 0.f, gk_ref::Mask::kCausal};
  std::vector<float> hs{1, 0, 0, 1}, cos{1, 1, 1, 1}, sin{0, 0, 0, 0}, eye{1, 0, 0, 1}, w0{0, 0};
  std::vector<float> mask;
  std::vector<float> run() {
    std::vector<float> out(4);
    gk_ref::Gemma3Inputs in{hs.data(),  cos.data(), sin.data(), mask.empty() ? nullptr : mask.data(),
                            eye.data(), eye.data(), eye.data(), eye.data(),
                            w0.data(),  w0.data()};
    gk_ref::gemma3_attention(dims, in, out.data());
    return out;
  }
};

TEST(CpuReference, TinyCausalLayer) {
  // Row 0 sees only key 0: out0 = v0 = [1, 0].
  // Row 1: softmax([0, 1.4140625]) = [0.19559, 0.80441] -> bf16 [0.1953125, 0.8046875]; out1 = p . V.
  TinyLayer t;
  const auto out = t.run();
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 0.1953125f);
  EXPECT_EQ(out[3], 0.8046875f);
}

TEST(CpuReference, TinySlidingWindow) {
  // Window 1: row 1 sees only key 1, out1 = v1 = [0, 1]; row 0 as in causal mode. Window 2 covers both keys of
  // row 1: the causal result.
  TinyLayer t;
  t.dims.window = 1;
  auto out = t.run();
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 1.0f);
  t.dims.window = 2;
  out = t.run();
  EXPECT_EQ(out[2], 0.1953125f);
  EXPECT_EQ(out[3], 0.8046875f);
}

TEST(CpuReference, TinyLayerWithSoftcap) {
  // cap 1: 1.4140625 / 1 -> tanh = 0.888354 -> bf16 0.88671875 (ulp 2^-8) -> * 1. Row 1:
  // softmax([0, 0.88671875]) = [0.291787, 0.708213] -> bf16 [0.291015625, 0.70703125].
  TinyLayer t;
  t.dims.softcap = 1.f;
  const auto out = t.run();
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[2], 0.291015625f);
  EXPECT_EQ(out[3], 0.70703125f);
}

TEST(CpuReference, Fp32ScoresModeSkipsScoreRounding) {
  // Same layer, softcap 3, precise yardstick: s = 3 tanh(q1.k1 * D^-0.5 / 3) with q1.k1 = 1.4140625^2 unrounded,
  // p = softmax([0, s]) unrounded; only the attention output (p itself here) and the result round to bf16.
  TinyLayer t;
  t.dims.softcap = 3.f;
  t.dims.fp32_scores = true;
  const auto out = t.run();
  const double s = 3.0 * std::tanh(1.4140625 * 1.4140625 / std::sqrt(2.0) / 3.0);
  const double p0 = 1.0 / (1.0 + std::exp(s));
  EXPECT_EQ(out[2], round_bf16(round_bf16(float(p0))));
  EXPECT_EQ(out[3], round_bf16(round_bf16(float(1.0 - p0))));
  // The official yardstick rounds s to bf16 first: 3 tanh(0.471) = 1.3167 -> 1.3125 moves p0 by 0.1%.
  t.dims.fp32_scores = false;
  const auto official = t.run();
  EXPECT_NEAR(official[2], out[2], 2e-3);
}

TEST(CpuReference, NoMaskAndFullyMaskedRow) {
  // No mask: row 0 sees [1.4140625, 0] -> p = [0.80441, 0.19559] -> bf16 [0.8046875, 0.1953125].
  TinyLayer t;
  t.dims.mask = gk_ref::Mask::kNone;
  auto out = t.run();
  EXPECT_EQ(out[0], 0.8046875f);
  EXPECT_EQ(out[1], 0.1953125f);
  // Additive mask with row 0 fully masked by the lowest bf16: every score rounds to that same value, so the
  // softmax is uniform: p = [0.5, 0.5], out0 = [0.5, 0.5], not NaN. Row 1 unmasked as in the no-mask case.
  t.dims.mask = gk_ref::Mask::kAdditive;
  const float lo = gk_ref::bf16_from_bits(0xff7f);
  t.mask = {lo, lo, 0, 0};
  out = t.run();
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[1], 0.5f);
  EXPECT_EQ(out[2], 0.1953125f);
  EXPECT_EQ(out[3], 0.8046875f);
}

TEST(CpuReference, NormWeightOffsetAndRope) {
  // Offset 0 and w = [0.5, 0.5] halve the normalized q and k: 0.70703125 e_i (bf16 of 0.707107).
  // q0.k0 = 0.499893 -> bf16 0.5, * 0.707107 -> 0.353553 -> bf16 0.353515625 (ulp 2^-9 in [0.25, 0.5)).
  // Row 1 (causal): softmax([0, 0.353515625]) = [0.412528, 0.587472] -> bf16 [0.412109375, 0.5859375]
  // (ulps 2^-9 and 2^-8).
  TinyLayer t;
  t.dims.norm_weight_offset = 0.f;
  t.w0 = {0.5f, 0.5f};
  auto out = t.run();
  EXPECT_EQ(out[2], 0.412109375f);
  EXPECT_EQ(out[3], 0.5859375f);
  // RoPE with cos = 0, sin = 1 maps x to rotate_half(x) = [-x1, x0]: q1 = k1 = 0.70703125 * [-1, 0]; the scores
  // of row 1 are unchanged (rotation preserves dot products between tokens rotated alike).
  t.cos = {0, 0, 0, 0};
  t.sin = {1, 1, 1, 1};
  out = t.run();
  EXPECT_EQ(out[2], 0.412109375f);
  EXPECT_EQ(out[3], 0.5859375f);
}

TEST(CpuReference, GqaHeadsShareKeyValues) {
  // Two query heads over one kv head with equal q weights produce equal halves of the attention output; with an
  // O projection that sums the two heads, out = 2 * single-head output.
  gk_ref::Gemma3Dims d{1, 3, 2, 2, 1, 2, 50.f, 1e-6f, 1.f, 0.f, gk_ref::Mask::kCausal};
  std::vector<float> hs{1, 0, 0, 1, 1, 1}, cos(6, 1.f), sin(6, 0.f), eye{1, 0, 0, 1}, wq{1, 0, 0, 1, 1, 0, 0, 1};
  std::vector<float> wo{1, 0, 1, 0, 0, 1, 0, 1}, w0{0, 0};
  std::vector<float> out(6);
  gk_ref::Gemma3Intermediates steps;
  gk_ref::Gemma3Inputs in{hs.data(), cos.data(), sin.data(), nullptr, wq.data(), eye.data(), eye.data(), wo.data(),
                          w0.data(), w0.data()};
  gk_ref::gemma3_attention(d, in, out.data(), &steps);
  for (int s = 0; s < 3; ++s) {
    for (int e = 0; e < 2; ++e) {
      EXPECT_EQ(steps.attn[(s * 2 + 0) * 2 + e], steps.attn[(s * 2 + 1) * 2 + e]);
      EXPECT_EQ(out[s * 2 + e], round_bf16(2 * steps.attn[s * 4 + e]));
    }
  }
  // Token 2 = [1, 1]: v2 = [1, 1]; q and k are normalized: [1, 1] * rsqrt(1) = [1, 1].
  EXPECT_EQ(steps.q[2 * 2 + 0], 1.0f);
  EXPECT_EQ(steps.k[2 * 2 + 1], 1.0f);
}

TEST(CpuReference, AudioNormKnownAnswer) {
  // hidden 2, one head of D = 2, identity projections. x = [3, 4]: mean(x^2) = 12.5, sqrt = 3.5355339.
  // q = x / 3.5355339 * [1, 2] = [0.8485281, 2.2627417]; v = x unchanged.
  gk_ref::AudioDims d{1, 1, 2, 1, 2, 0.f};
  std::vector<float> hs{3, 4}, eye{1, 0, 0, 1}, qw{1, 2}, kw{1, 1};
  std::vector<double> q(2), k(2), v(2);
  gk_ref::audio_qkv(d, hs.data(), eye.data(), eye.data(), eye.data(), qw.data(), kw.data(), q.data(), k.data(),
                    v.data());
  EXPECT_NEAR(q[0], 3.0 / std::sqrt(12.5), 1e-12);
  EXPECT_NEAR(q[1], 8.0 / std::sqrt(12.5), 1e-12);
  EXPECT_NEAR(k[1], 4.0 / std::sqrt(12.5), 1e-12);
  EXPECT_EQ(v[0], 3.0);
  EXPECT_EQ(v[1], 4.0);
}

}  // namespace
