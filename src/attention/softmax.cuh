// Score transform and softmax for the attention kernels, on the mma.sync accumulator layout: each thread holds two
// query rows (g and g+8 of its warp's 16) and, per n8 tile, the columns 2t and 2t+1. The online softmax (running
// row maximum) serves every mode; the Hopper kernel's fixed-reference form (fixed_softmax.hpp) is
// OnlineSoftmax::softcap_probabilities (in additive mode's bounded blocks, on tiles with mask bits,
// scores_to_logits then OnlineSoftmax::probabilities against the bias), which shares the running sums and the
// normalization.
#pragma once

#include <cuda_bf16.h>

#include <cfloat>
#include <cmath>

#include "common/device/sm80_primitives.cuh"
#include "attention/params.hpp"

namespace gk::gemma3 {

// An additive mask value as a base-2 logit offset. Clamped at -FLT_MAX, so the lowest bf16 and -inf both stay
// finite: a row masked everywhere then averages V uniformly (what the reference computes), never NaN. A value
// that clamps is "dead": adding -FLT_MAX absorbs any finite score, so its probability is exactly zero as soon as
// its row has one live key. The tile classification (mask_tiles.cu) uses this same function, which is what makes
// skipping a tile of dead values exact.
__device__ __forceinline__ float mask_logit2(float m) { return fmaxf(m * kLog2e, -FLT_MAX); }

// Adds the additive mask to the logits a thread holds (query positions rows[0] and rows[1], column pairs
// col0 + 8 nt + {0, 1});
// keys at or past the sequence end are left to the edge masking, rows there get nothing (they are not stored). With
// p.mask_pairs a column pair is one 4-byte load.
template <int kNTiles>
__device__ __forceinline__ void add_mask_values(float (&s)[kNTiles][4], const AttentionParams& p,
                                                const __nv_bfloat16* mask_rows, const int (&rows)[2], int col0) {
  const int seq_len = p.seq_len;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int row = rows[hh];
    if (row >= seq_len) continue;
    const __nv_bfloat16* m_row = mask_rows + int64_t(row) * p.mask_row_stride;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      const int col = col0 + nt * 8;
      if (col >= seq_len) continue;
      float m0, m1 = 0.f;
      if (p.mask_pairs) {
        const float2 m = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(m_row + col));
        m0 = m.x;
        m1 = m.y;
      } else {
        m0 = __bfloat162float(m_row[col]);
        if (col + 1 < seq_len) m1 = __bfloat162float(m_row[col + 1]);
      }
      s[nt][2 * hh] += mask_logit2(m0);
      s[nt][2 * hh + 1] += mask_logit2(m1);
    }
  }
}

// A tile whose mask values are all 0 or dead reads one 64-bit live word per row and 64-column part instead of a
// load per column pair (mask_tiles.cu: column 2l at bit l, column 2l + 1 at bit 32 + l). These are the words of the
// thread's two rows over the tile starting at key n0 (a multiple of 64), as w[row][part]; a row past the sequence
// end gets all-live words (nothing added: the row is padding, never stored). The Hopper kernel loads them before it
// waits for the tile's scores, so that their latency overlaps the Q K^T.
template <int kNTiles>
__device__ __forceinline__ void load_mask_bits(uint64_t (&w)[2][2], const AttentionParams& p, int b,
                                               const int (&rows)[2], int n0) {
  static_assert(kNTiles == 8 || kNTiles == 16, "64- or 128-key tiles");
  const MaskTileLists& t = p.tiles;
  const int pn = n0 / 64;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int row = rows[hh];
    w[hh][0] = w[hh][1] = ~0ull;
    if (row >= p.seq_len) continue;
    const uint64_t* words = t.bits + ((int64_t(b) * t.parts + row / 64) * t.parts + pn) * 64 + row % 64;
    w[hh][0] = *words;
    // Past the last part the columns are past the sequence end: the edge masking takes them.
    if (kNTiles == 16 && pn + 1 < t.parts) w[hh][1] = words[64];
  }
}

// A dead position adds `dead`: -FLT_MAX, exactly what add_mask_values adds there (mask_logit2), or -inf where the
// tile list allows it (kMaskBits in the Hopper kernel's unscaled tiles).
// The thread's pair in a part is columns 8 (nt % 8) + 2 (lane % 4) and the next: bits 4 (nt % 8) + lane % 4 of the
// word's halves. Each half is shifted by lane % 4 once, so every test is one AND with an immediate (a test of a
// 64-bit word at a lane-dependent bit took two, and one more shift per pair).
template <int kNTiles>
__device__ __forceinline__ void apply_mask_bits(float (&s)[kNTiles][4], const uint64_t (&w)[2][2], int lane,
                                                float dead) {
  static_assert(kNTiles % 8 == 0, "whole 64-column parts");
  const int q = lane & 3;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
#pragma unroll
    for (int part = 0; part < kNTiles / 8; ++part) {
      const uint32_t even = static_cast<uint32_t>(w[hh][part]) >> q;
      const uint32_t odd = static_cast<uint32_t>(w[hh][part] >> 32) >> q;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int nt = part * 8 + j;
        if (!(even & (1u << (4 * j)))) s[nt][2 * hh] += dead;
        if (!(odd & (1u << (4 * j)))) s[nt][2 * hh + 1] += dead;
      }
    }
  }
}

// Raw Q.K dot products -> base-2 logits (divided by the softmax's factor where it applies the last scale: below):
// scale, optional softcap, then the mask (additive mode, as the tile list says: MaskApply; a bits tile's live words
// from `bits_ahead` when the caller loaded them early, load_mask_bits), then the edge masking (keys past the
// sequence end; causal: keys right of the diagonal).
// Softcap: cap*tanh(dot*scale/cap) with tanh.approx (one special-function op; relative error ~2^-11, which the
// precise-yardstick tests bound), scale/cap and cap*log2(e) folded on the host.
template <bool kSoftcap, MaskMode kMask, int kNTiles>
__device__ __forceinline__ void scores_to_logits(float (&s)[kNTiles][4], const AttentionParams& p, int b,
                                                 const __nv_bfloat16* mask_rows, const int (&rows)[2], int n0, int lane,
                                                 bool edge_tile, uint32_t mask_apply,
                                                 const uint64_t (*bits_ahead)[2][2] = nullptr, bool unscaled = false) {
  // Without an additive mask the last scale (cap * log2 e, or scale * log2 e) is left to the softmax, which folds it
  // into the FFMA that subtracts the running max (logit_scale<kSoftcap, kMask>). So it is for an additive mask's
  // tiles without mask values whose dead scores may be -inf (`unscaled`: kMaskNone and kMaskBits, edge tiles too;
  // the caller's softmax then applies the factor, OnlineSoftmax::exponentiate_mixed, or on a bounded block's tile
  // OnlineSoftmax::probabilities against the fixed reference): one multiply per score less where most tiles are such.
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
  const int seq_len = p.seq_len;
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = rows[e >> 1];
      const int col = col0 + nt * 8 + (e & 1);
      bool masked = col >= seq_len;
      if constexpr (kMask == MaskMode::kCausal) masked |= col > row;
      if (masked) s[nt][e] = -INFINITY;
    }
  }
}

// The factor the softmax still applies to what scores_to_logits left (1 where it produced base-2 logits; the Hopper
// kernel's additive mode passes a factor per tile instead, exponentiate_mixed).
template <bool kSoftcap, MaskMode kMask>
__device__ __forceinline__ float logit_scale(const AttentionParams& p) {
  if constexpr (kMask == MaskMode::kAdditive) return 1.f;
  return kSoftcap ? p.softcap_out : p.scale_log2;
}

struct OnlineSoftmax {
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};  // this thread's columns only; the quad is summed in finalize()

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
  // arithmetic, but the causal kernel built that way measured 2-4% slower at (4, 2053) (docs/perf-log.md v19).
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

  // The fixed-reference softmax straight from the raw dot products: per score tanh(dot * softcap_in), then
  // exp2(t * scale + bias), summed. One pass, so that each score's ex2 follows its tanh instead of waiting behind
  // all of the tile's tanh as scores_to_logits then probabilities would (measured 3-9% faster at S >= 613,
  // docs/perf-log.md v20). kEdge: keys at or past seq_len, and with kCausal right of the row, get probability 0
  // (the thread's two rows, column pairs col0 + 8 nt + {0, 1}, as in scores_to_logits).
  template <bool kEdge, bool kCausal, int kNTiles>
  __device__ __forceinline__ void softcap_probabilities(float (&s)[kNTiles][4], float softcap_in, float scale,
                                                        float bias, const int (&rows)[2], int col0, int seq_len) {
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = fmaf(device::tanh_approx(s[nt][e] * softcap_in), scale, bias);
        if constexpr (kEdge) {
          const int col = col0 + nt * 8 + (e & 1);
          bool masked = col >= seq_len;
          if constexpr (kCausal) masked |= col > rows[e >> 1];
          if (masked) x = -INFINITY;
        }
        s[nt][e] = device::ex2_approx(x);
        row_sum[e >> 1] += s[nt][e];
      }
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

// Normalizes the output rows a thread holds and stores them as bf16 ([token, head, dim] with p's strides);
// rows at or past the sequence end are padding and are not written.
template <int kDTiles>
__device__ __forceinline__ void store_output(const float (&acc_o)[kDTiles][4], const OnlineSoftmax& softmax,
                                             const AttentionParams& p, int b, int h, int row0, int lane) {
  float inv_l[2];
  softmax.finalize(inv_l);
  __nv_bfloat16* o = p.o + b * p.o_batch_stride + h * p.o_head_stride + 2 * (lane & 3);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + half * 8;
    if (row >= p.seq_len) continue;
    __nv_bfloat16* o_row = o + row * p.o_token_stride;
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
      *reinterpret_cast<uint32_t*>(o_row + dt * 8) =
          device::pack_bf16x2(acc_o[dt][2 * half] * inv_l[half], acc_o[dt][2 * half + 1] * inv_l[half]);
    }
  }
}

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
