// Seeded input generation following the suites' recipe: randn activations, randn/sqrt(in) weights,
// cos(t)/sin(t') with t, t' = randn clamped to [-pi, pi] drawn independently, masks of 0 / lowest bf16.
// A FillSpec says how element i of a tensor is made; the same spec fills device memory (fill) or host memory
// (fill_host), so the CPU-only path of the CLI sees the inputs a GPU run would.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "rng.hpp"

namespace gk_testkit {

enum class FillKind { kNormal, kAroundOne, kValue, kRopeCos, kRopeSin };

struct FillSpec {
  FillKind kind = FillKind::kValue;
  uint64_t seed = 0;
  float scale = 0.f;  // kNormal: scale*randn; kAroundOne: 1 + scale*randn; kValue: the value
  // > 0: the tensor is rows of ramp_row elements, ramp_seq rows a sequence, and row t of a sequence has its first
  // ramp_row * t / ramp_seq elements negated (a sign ramp along the sequence; Gemma3Recipe::anti_aligned_ramp).
  int64_t ramp_row = 0, ramp_seq = 0;
};

GK_HD inline float fill_value_at_unramped(const FillSpec& f, int64_t i) {
  switch (f.kind) {
    case FillKind::kNormal:
      return f.scale * normal_at(f.seed, i);
    case FillKind::kAroundOne:
      return 1.f + f.scale * normal_at(f.seed, i);
    case FillKind::kRopeCos:
      return cosf(rope_angle_at(f.seed, i));
    case FillKind::kRopeSin:
      return sinf(rope_angle_at(f.seed, i));
    default:
      return f.scale;
  }
}

GK_HD inline float fill_value_at(const FillSpec& f, int64_t i) {
  const float v = fill_value_at_unramped(f, i);
  if (f.ramp_row <= 0 || f.ramp_seq <= 0) return v;
  const int64_t e = i % f.ramp_row, t = (i / f.ramp_row) % f.ramp_seq;
  return e * f.ramp_seq < t * f.ramp_row ? -v : v;
}

enum class MaskPattern {
  kCausal,        // 0 on and below the diagonal, lowest bf16 above (the suites' mask)
  kPaddedCausal,  // causal, and the first pad(b) keys of batch b masked too: rows i < pad(b) are fully masked
  // Causal within a window of max(1, S / 3) keys (i - j < W): key tiles left of the band are masked everywhere.
  // Masked entries are -inf in odd batches, the lowest bf16 in even ones.
  kSlidingWindow,
  // Causal with a distance bias -0.02 (i - j) on the visible entries: nonzero almost everywhere.
  kBiasedCausal,
  // kSlidingWindow, and rows i with i % 97 == 50 masked everywhere (lowest bf16): dead rows in later query blocks,
  // whose blocks must keep the key tiles left of the band.
  kWindowDeadRows,
};

GK_HD inline int64_t padded_causal_pad(int64_t b, int64_t seq_len) {
  return seq_len - 1 < 3 + 5 * b ? seq_len - 1 : 3 + 5 * b;
}

// Element (b, 0, i, j) of a [B,1,S,S] mask at flat index idx.
GK_HD inline float mask_value_at(MaskPattern pattern, int64_t seq_len, int64_t idx) {
  const int64_t j = idx % seq_len, i = (idx / seq_len) % seq_len, b = idx / (seq_len * seq_len);
  constexpr float kLowest = -3.3895313892515355e38f;  // lowest finite bf16
  bool visible = j <= i;
  if (pattern == MaskPattern::kPaddedCausal) visible = visible && j >= padded_causal_pad(b, seq_len);
  if (pattern == MaskPattern::kWindowDeadRows && i % 97 == 50) return kLowest;
  if (pattern == MaskPattern::kSlidingWindow || pattern == MaskPattern::kWindowDeadRows) {
    const int64_t window = seq_len / 3 > 1 ? seq_len / 3 : 1;
    if (visible && i - j < window) return 0.f;
    return (b & 1) ? -INFINITY : kLowest;
  }
  if (pattern == MaskPattern::kBiasedCausal) return visible ? -0.02f * float(i - j) : kLowest;
  return visible ? 0.f : kLowest;
}

void fill(const FillSpec& spec, __nv_bfloat16* dst, int64_t n, cudaStream_t stream);
void fill(const FillSpec& spec, float* dst, int64_t n, cudaStream_t stream);
void fill_mask(__nv_bfloat16* mask, int64_t batch, int64_t seq_len, MaskPattern pattern, cudaStream_t stream);

// Host versions; with round_to_bf16 the values are what a bf16 device tensor would hold.
void fill_host(const FillSpec& spec, float* dst, int64_t n, bool round_to_bf16);
void fill_mask_host(float* mask, int64_t batch, int64_t seq_len, MaskPattern pattern);
// n values of fill_host as a new vector.
std::vector<float> fill_host(const FillSpec& spec, int64_t n, bool round_to_bf16);


inline FillSpec normal(uint64_t seed, float scale) { return {FillKind::kNormal, seed, scale}; }
inline FillSpec around_one(uint64_t seed, float scale) { return {FillKind::kAroundOne, seed, scale}; }
inline FillSpec constant(float value) { return {FillKind::kValue, 0, value}; }

// Successive host tensors of scale * randn values as bf16 holds them, each from the next seed (tests that build
// their own inputs).
struct NormalDraws {
  uint64_t seed;
  std::vector<float> operator()(int64_t n, float scale) {
    return fill_host(normal(seed++, scale), n, /*round_to_bf16=*/true);
  }
};

}  // namespace gk_testkit
