// Score transform and softmax policies of the attention kernels, on the mma.sync accumulator layout (the wgmma
// accumulator layout is the same): each thread holds two query rows (g and g+8 of its warp's 16) and, per n8 tile,
// the columns 2t and 2t+1.
//   RowSoftmax       the online softmax against the running row maximum: every mode, both kernels.
//   FixedRefSoftmax  against a constant reference instead (fixed_softmax.hpp): the Hopper kernel with a softcap.
// Both accumulate into SoftmaxSums (the running row sums and the normalization), so one work tile of the Hopper
// kernel's additive mode can take either form.
#pragma once

#include <cuda_bf16.h>

#include <cfloat>
#include <cmath>

#include "common/device/sm80_primitives.cuh"
#include "attention/mask_policy.cuh"
#include "attention/params.hpp"

namespace gk::gemma3 {

// Raw Q.K dot products -> base-2 logits (divided by the softmax's factor where it applies the last scale: below):
// scale, optional softcap, then the mask (additive mode, as the tile list says: MaskApply; a bits tile's live words
// from `bits_ahead` when the caller loaded them early, load_mask_bits), then on an edge tile the mask policy's
// hidden keys (MaskPolicy::mask_edge).
// Softcap: cap*tanh(dot*scale/cap) with tanh.approx (one special-function op; relative error ~2^-11, which the
// precise-yardstick tests bound), scale/cap and cap*log2(e) folded on the host.
template <bool kSoftcap, MaskMode kMask, int kNTiles>
__device__ __forceinline__ void scores_to_logits(float (&s)[kNTiles][4], const AttentionParams& p, int b,
                                                 const __nv_bfloat16* mask_rows, const int (&rows)[2], int n0, int lane,
                                                 bool edge_tile, uint32_t mask_apply,
                                                 const uint64_t (*bits_ahead)[2][2] = nullptr, bool unscaled = false,
                                                 int key_len = -1) {
  // Without an additive mask the last scale (cap * log2 e, or scale * log2 e) is left to the softmax, which folds it
  // into the FFMA that subtracts the running max (logit_scale<kSoftcap, kMask>). So it is for an additive mask's
  // tiles without mask values whose dead scores may be -inf (`unscaled`: kMaskNone and kMaskBits, edge tiles too;
  // the caller's softmax then applies the factor, RowSoftmax::exponentiate_mixed, or on a bounded block's tile
  // FixedRefSoftmax::probabilities): one multiply per score less where most tiles are such.
  const bool scaled = kMask == MaskMode::kAdditive && !unscaled;
  if (scaled) {
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = kSoftcap ? p.softcap_out * device::tanh_approx(s[nt][e] * p.softcap_in) : s[nt][e] * p.scale_log2;
      }
    }
  } else if constexpr (kSoftcap) {
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = device::tanh_approx(s[nt][e] * p.softcap_in);
    }
  }
  const int col0 = n0 + 2 * (lane & 3);
  if constexpr (kMask == MaskMode::kAdditive) {
    if (mask_apply_bits(mask_apply)) {
      const float dead = unscaled ? -INFINITY : -FLT_MAX;
      if (bits_ahead != nullptr) {
        apply_mask_bits(s, *bits_ahead, lane, dead);
      } else {
        uint64_t w[2][2];
        load_mask_bits<kNTiles>(w, p, b, rows, n0);
        apply_mask_bits(s, w, lane, dead);
      }
    }
    if (mask_apply == kMaskValues) add_mask_values(s, p, mask_rows, rows, col0);
  }
  if (!edge_tile) return;
  // key_len: where the keys end when not at the queries' seq_len (a key/value cache's cached + new tokens).
  MaskPolicy<kMask>::mask_edge(s, rows, col0, key_len < 0 ? p.seq_len : key_len, p.window);
}

// The factor the softmax still applies to what scores_to_logits left (1 where it produced base-2 logits; the Hopper
// kernel's additive mode passes a factor per tile instead, exponentiate_mixed).
template <bool kSoftcap, MaskMode kMask>
__device__ __forceinline__ float logit_scale(const AttentionParams& p) {
  if constexpr (kMask == MaskMode::kAdditive) return 1.f;
  return kSoftcap ? p.softcap_out : p.scale_log2;
}

// The running row sums both softmax forms accumulate, and the normalization.
struct SoftmaxSums {
  float row_sum[2] = {0.f, 0.f};  // this thread's columns only; the quad is summed in finalize()

  // s <- exp2(s * scale + neg_ref) per row, summed into the running sums.
  template <int kNTiles>
  __device__ __forceinline__ void probabilities(float (&s)[kNTiles][4], float scale, const float (&neg_ref)[2]) {
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = device::ex2_approx(fmaf(s[nt][e], scale, neg_ref[e >> 1]));
        row_sum[e >> 1] += s[nt][e];
      }
    }
  }

  __device__ __forceinline__ void finalize(float (&inv_sum)[2]) const {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float l = row_sum[i];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      inv_sum[i] = l > 0.f ? 1.f / l : 0.f;
    }
  }
};

// The online softmax: probabilities against the running row maximum, the output rescaled when it moves.
struct RowSoftmax : SoftmaxSums {
  float row_max[2] = {-INFINITY, -INFINITY};

  // Rescales the running output by exp2((old_max - new_max) * scale) and turns the scaled logits in `s` into
  // probabilities relative to the new running max (see exponentiate).
  template <int kNTiles, int kDTiles>
  __device__ __forceinline__ void update(float (&s)[kNTiles][4], float (&acc_o)[kDTiles][4], float scale) {
    float alpha[2];
    exponentiate(s, alpha, scale);
    rescale(acc_o, alpha);
  }

  // The first half of update(): new running max, probabilities in `s`, running sums; `alpha` is the factor the
  // running output still has to be multiplied by (split out so the output can be rescaled after an in-flight
  // P*V that accumulates into it has finished).
  // `s` holds base-2 logits divided by `scale` (> 0), which the subtraction of the max applies in one FFMA; the
  // running max is kept in the same units. The row max is written out rather than taken from quad_row_max: the same
  // arithmetic, but the causal kernel built that way was slower (docs/perf-log.md v19).
  template <int kNTiles>
  __device__ __forceinline__ void exponentiate(float (&s)[kNTiles][4], float (&alpha)[2], float scale) {
    float mx[2] = {row_max[0], row_max[1]};
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      mx[0] = fmaxf(mx[0], fmaxf(s[nt][0], s[nt][1]));
      mx[1] = fmaxf(mx[1], fmaxf(s[nt][2], s[nt][3]));
    }
    float ref[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
      ref[i] = mx[i] == -INFINITY ? 0.f : mx[i];  // a row with nothing visible yet: avoid (-inf) - (-inf)
      alpha[i] = device::ex2_approx((row_max[i] - ref[i]) * scale);
      ref[i] *= -scale;
      row_max[i] = mx[i];
      row_sum[i] *= alpha[i];
    }
    probabilities(s, scale, ref);
  }

  // exponentiate() for a softmax whose tiles come in two units (additive mode, attention_sm90.cuh): the running max
  // is kept in base-2 logits, and `s` holds base-2 logits divided by `tile_scale` (1 for a tile scores_to_logits
  // scaled, the factor for one it left unscaled). With tile_scale 1 the same values as exponentiate(s, alpha, 1),
  // so the same bits.
  template <int kNTiles>
  __device__ __forceinline__ void exponentiate_mixed(float (&s)[kNTiles][4], float (&alpha)[2], float tile_scale) {
    float mx[2] = {-INFINITY, -INFINITY};
    quad_row_max(s, mx);
    float neg_ref[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      // tile_scale > 0, so the scaled maximum is the maximum of the scaled values (the rounding is monotone).
      mx[i] = fmaxf(row_max[i], mx[i] * tile_scale);
      const float ref = mx[i] == -INFINITY ? 0.f : mx[i];  // a row with nothing visible yet
      alpha[i] = device::ex2_approx(row_max[i] - ref);
      neg_ref[i] = -ref;
      row_max[i] = mx[i];
      row_sum[i] *= alpha[i];
    }
    probabilities(s, tile_scale, neg_ref);
  }

  // The maximum of each of the thread's two rows over the tile, folded into mx and reduced over the quad that holds
  // the row.
  template <int kNTiles>
  __device__ __forceinline__ static void quad_row_max(const float (&s)[kNTiles][4], float (&mx)[2]) {
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      mx[0] = fmaxf(mx[0], fmaxf(s[nt][0], s[nt][1]));
      mx[1] = fmaxf(mx[1], fmaxf(s[nt][2], s[nt][3]));
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
    }
  }

  template <int kDTiles>
  __device__ __forceinline__ static void rescale(float (&acc_o)[kDTiles][4], const float (&alpha)[2]) {
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
      acc_o[dt][0] *= alpha[0];
      acc_o[dt][1] *= alpha[0];
      acc_o[dt][2] *= alpha[1];
      acc_o[dt][3] *= alpha[1];
    }
  }
};

// The former name of RowSoftmax.
using OnlineSoftmax = RowSoftmax;

// The fixed-reference softmax (fixed_softmax.hpp): probabilities exp2(logit + bias) against the constant
// p.fixed_bias, with no maximum to reduce across the quad and no output rescale. Stateless: it adds to the
// caller's sums, so that a block may mix it with RowSoftmax's tiles' sums (never with their maximum).
template <MaskMode kMask>
struct FixedRefSoftmax {
  // Straight from the raw dot products: per score tanh(dot * softcap_in), then exp2(t * scale + bias), summed. One
  // pass, so that each score's ex2 follows its tanh instead of waiting behind all of the tile's tanh as
  // scores_to_logits then probabilities would (docs/perf-log.md v20). kEdge: the mask policy's hidden keys get
  // probability 0 (the thread's two rows, column pairs col0 + 8 nt + {0, 1}, as in scores_to_logits).
  template <bool kEdge, int kNTiles>
  __device__ __forceinline__ static void softcap_probabilities(SoftmaxSums& sums, float (&s)[kNTiles][4],
                                                               float softcap_in, float scale, float bias,
                                                               const int (&rows)[2], int col0, int seq_len,
                                                               int window) {
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = fmaf(device::tanh_approx(s[nt][e] * softcap_in), scale, bias);
        if constexpr (kEdge) x = MaskPolicy<kMask>::hide(x, rows[e >> 1], col0 + nt * 8 + (e & 1), seq_len, window);
        s[nt][e] = device::ex2_approx(x);
        sums.row_sum[e >> 1] += s[nt][e];
      }
    }
  }

  // From logits scores_to_logits left unscaled (an additive mask's bits tile): exp2(s * scale + bias), summed.
  template <int kNTiles>
  __device__ __forceinline__ static void probabilities(SoftmaxSums& sums, float (&s)[kNTiles][4], float scale,
                                                       const float (&bias)[2]) {
    sums.probabilities(s, scale, bias);
  }
};

// P (probabilities of a 16-key step) as the A operand of the P*V MMA: the accumulator layout of two n8 tiles
// is the A-fragment layout of one k16 step.
template <int kNTiles>
__device__ __forceinline__ void pack_p(const float (&s)[kNTiles][4], uint32_t (&p)[kNTiles / 2][4]) {
#pragma unroll
  for (int kk = 0; kk < kNTiles / 2; ++kk) {
    p[kk][0] = device::pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
    p[kk][1] = device::pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
    p[kk][2] = device::pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    p[kk][3] = device::pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

}  // namespace gk::gemma3
