// The Hopper attention kernel's softmax without a running maximum. With a softcap and no mask values (causal and
// no-mask mode; in additive mode the blocks whose tile list shows only zero and masked values and no row masked
// everywhere), every base-2 logit is cap * log2(e) * tanh(.), inside [-c, c] for c = cap * log2(e), so a constant
// reference can stand in for the row maximum: p = exp2(logit + bias) needs no per-tile maximum, shuffles, correction
// factor or output rescale. The bias keeps every probability of a live key inside about [2^kLowest, 2^kHighest]
// (tanh.approx's ~2^-11 relative error moves the ends by a few hundredths of a binade): normal in fp32 and in bf16 (P
// is the bf16 A operand of P*V), so a row whose every score sits at -cap keeps its relative weights, and the sums
// cannot overflow while |v| * S stays below 2^(128 - kHighest) (2^83.7 at cap 50; the running maximum's bound is
// 2^128).
//
// The price is rounding: under a running maximum a row's largest probability is exactly 1 in bf16, here it rounds
// like the others, while the row sum adds the unrounded fp32 values. Against an fp32-score yardstick the layer's
// error grows somewhat; against the official reference (bf16 scores and probabilities) the two forms are
// indistinguishable (docs/perf-log.md v20). The host computes the bias (AttentionParams::fixed_bias); the host tests
// check its range.
#pragma once

namespace gk::gemma3 {

inline constexpr float kFixedSoftmaxLowest = -100.f;
inline constexpr float kFixedSoftmaxHighest = 64.f;

// True, with the bias, where the range [-c, c] (c = cap * log2 e, the softcap_out of AttentionParams) fits:
// c <= 82, cap <= 56.8. Where c <= -kLowest / 2 the bias is -c and the largest possible probability 1, as under a
// row maximum; beyond, the bias lifts the smallest possible probability to 2^kLowest.
constexpr bool fixed_softmax_bias(float c, float* bias) {
  if (!(c > 0.f) || 2.f * c > kFixedSoftmaxHighest - kFixedSoftmaxLowest) return false;
  const float lift = c + kFixedSoftmaxLowest;
  *bias = lift > -c ? lift : -c;
  return true;
}

}  // namespace gk::gemma3
