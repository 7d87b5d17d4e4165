// The Hopper kernel's scores of one work tile, for one consumer warpgroup's rows (Sm90TileScores): which key tile
// comes next, with an additive tile list read a tile ahead and a bits tile's words loaded early, and each key
// tile's scores to probabilities under the mask policy (mask_policy.cuh) and the softmax policy the tile takes
// (softmax.cuh).
#pragma once

#include <cuda_bf16.h>

#include "attention/mask_policy.cuh"
#include "attention/params.hpp"
#include "attention/softmax.cuh"
#include "attention/tile_scheduler.cuh"

namespace gk::gemma3 {

// Constructed per work tile. The parameters and the work tile come with each call, by reference, and the lane is
// read from threadIdx: held in the struct, they changed the kernel's generated code.
// kCached: the work tile's rows sit at positions p0 + m0 + i and its keys end at key_len (TileCoord, a key/value
// cache's cached tokens before the new ones); otherwise p0 = 0 and key_len = seq_len.
template <class Tr, bool kSoftcap, MaskMode kMask, bool kFixedRef, bool kCached = false>
struct Sm90TileScores {
  static_assert(!kFixedRef || kSoftcap, "logits bounded by the softcap");
  static constexpr int kNTiles = Tr::kNTiles;
  // The diagonal key tile spans both warpgroups' rows (kBlockN = kBlockM): the first warpgroup's rows see only its
  // first half. With 64-key tiles the block's last key tile lies wholly right of the first warpgroup's rows, which
  // the edge masking gives probability 0 (one tile of the block's visits, at D = 256).
  static constexpr bool kHalfDiagonal = Tr::kBlockN == 2 * Tr::kConsumerRows;

  const int half_block;
  const float scale;  // RowSoftmax's factor
  // The factor an additive mask's unscaled tiles leave to the softmax (what the other modes' `scale` is).
  const float logit_factor;
  const float fixed_ref[2];  // FixedRefSoftmax's reference
  const int wg_pos0;  // this warpgroup's first query position (a packed tail's rows all start at m0)
  const int rows[2];  // the thread's two query positions
  const __nv_bfloat16* const mask_rows;
  // The key tile is looked up before the wait on its scores, and a bits tile's live words (additive mode) are
  // loaded then, used after the wait. An additive tile list's entry is read a whole key tile ahead (the first two
  // come in the slot), so that the branch on its kind does not wait for a load per key tile (docs/perf-log.md v18).
  uint64_t bits_ahead[2][2];
  uint32_t entry_ahead;
  RowSoftmax softmax;  // its sums serve FixedRefSoftmax's tiles too
  // FixedRefSoftmax for every tile: the output is never rescaled.
  const bool fixed_tile;
  bool half_keys;  // first_step's half diagonal tile (first_key)

  __device__ __forceinline__ Sm90TileScores(const AttentionParams& p, const TileCoord& tc, int half, int warp)
      : half_block(half),
        scale(logit_scale<kSoftcap, kMask>(p)),
        logit_factor(kSoftcap ? p.softcap_out : p.scale_log2),
        fixed_ref{p.fixed_bias, p.fixed_bias},
        wg_pos0((kCached ? tc.p0 : 0) + (tc.tail_rows > 0 ? tc.m0 : tc.m0 + half * Tr::kConsumerRows)),
        rows{position(tc, half * Tr::kConsumerRows + warp * 16 + (lane() >> 2)),
             position(tc, half * Tr::kConsumerRows + warp * 16 + (lane() >> 2) + 8)},
        mask_rows(kMask == MaskMode::kAdditive ? p.mask + tc.b * p.mask_batch_stride : nullptr),
        entry_ahead(tc.entries[1]),
        fixed_tile(kFixedRef && (kMask != MaskMode::kAdditive || tc.bounded)) {}

  // The work tile's first key tile; first_step takes it.
  __device__ __forceinline__ KeyTile first_key(const AttentionParams& p, const TileCoord& tc) {
    const KeyTile kt = next_key(p, tc, 0);
    // With a cache the diagonal tile need not start at the block's first position (p0 % kBlockN != 0).
    half_keys = kHalfDiagonal && !kCached && MaskPolicy<kMask>::kCausal && (half_block == 0 || tc.tail_rows > 0);
    return kt;
  }

  // Key tile nb (first_key for 0), called once each in order: an additive list's read-ahead moves on.
  __device__ __forceinline__ KeyTile next_key(const AttentionParams& p, const TileCoord& tc, int nb) {
    if constexpr (kMask == MaskMode::kAdditive) {
      uint32_t e = tc.entries[0];
      if (nb > 0) {
        e = entry_ahead;
        entry_ahead = tc.list[min(nb + 1, tc.n_blocks - 1)];
      }
      const KeyTile kt = decode_key_entry<Tr::kBlockN>(tc, e, half_block);
      if (mask_apply_bits(kt.mask)) load_mask_bits<kNTiles>(bits_ahead, p, tc.b, rows, kt.n0);
      return kt;
    } else {
      return key_tile<kMask, Tr::kBlockN>(tc, nb, half_block);
    }
  }

  // The first key tile's probabilities: the output is still zero, nothing to rescale. Causal mode starts with the
  // diagonal tile (MaskPolicy::key_tile). Its keys past the 64th lie right of the diagonal for every row of the
  // block's first half, and for every row of a packed tail (tail_rows <= 64, all of its heads' rows at positions
  // m0 .. m0 + tail_rows - 1), so the first consumer warpgroup's softmax, and both of a packed tail's, take the
  // tile's first 64 keys only (half their special-function work there) and give the rest probability 0. The wgmma
  // stay full width: a 64-key Q K^T for one warpgroup made ptxas serialize every wgmma of the kernel (C7515), as
  // did skipping half of its P*V (C7511).
  __device__ __forceinline__ void first_step(const AttentionParams& p, const TileCoord& tc, const KeyTile& first,
                                            float (&acc_s)[kNTiles][4], float (&alpha)[2]) {
    if (kHalfDiagonal && half_keys) {
      auto& acc_s_half = reinterpret_cast<float(&)[kNTiles / 2][4]>(acc_s);  // the first half of the n8 tiles
      if constexpr (kFixedRef) {
        fixed_probabilities(p, acc_s_half, first.n0, true, keys_end(p, tc));
      } else {
        scores_to_logits<kSoftcap, kMask, kNTiles / 2>(acc_s_half, p, tc.b, mask_rows, rows, first.n0, lane(), true,
                                                       first.mask);
        softmax.exponentiate(acc_s_half, alpha, scale);
      }
#pragma unroll
      for (int nt = kNTiles / 2; nt < kNTiles; ++nt) acc_s[nt][0] = acc_s[nt][1] = acc_s[nt][2] = acc_s[nt][3] = 0.f;
    } else {
      step(p, tc, first, acc_s, alpha);
    }
  }

  // Key tile kt's scores to logits under the mask policy, then to probabilities under the tile's softmax policy;
  // `alpha`: RowSoftmax's factor for the running output. In additive mode this kernel alone leaves a tile without
  // mask values unscaled, its dead scores -inf where the tile list allows it, and the softmax's FFMA applies the
  // factor, as in the other modes (scores_to_logits); a block takes FixedRefSoftmax only where its tile list says
  // its logits stay bounded (kListBounded), the running maximum elsewhere.
  __device__ __forceinline__ void step(const AttentionParams& p, const TileCoord& tc, const KeyTile& kt,
                                      float (&acc_s)[kNTiles][4], float (&alpha)[2]) {
    const int n0 = kt.n0;
    // An edge tile may hold keys the mask policy hides from these rows (MaskPolicy::hide): past the sequence end,
    // (causal) right of the warpgroup's first row, or (sliding window) `window` or more left of its last row (a
    // packed tail's rows end before that).
    constexpr bool kCausal = MaskPolicy<kMask>::kCausal;
    const int key_len = keys_end(p, tc);
    const bool edge = (n0 + Tr::kBlockN > key_len) || (kCausal && n0 + Tr::kBlockN - 1 > wg_pos0) ||
                      (MaskPolicy<kMask>::kWindow && wg_pos0 + (Tr::kConsumerRows - 1) - n0 >= p.window);
    if constexpr (kMask == MaskMode::kAdditive) {
      if (fixed_tile) {
        // A bounded block's tiles are kMaskNone or kMaskBits, and no row is dead everywhere: dead scores -inf.
        if (kt.mask == kMaskNone) {
          fixed_probabilities(p, acc_s, n0, edge, key_len);
        } else {
          scores_to_logits<kSoftcap, kMask, kNTiles>(acc_s, p, tc.b, mask_rows, rows, n0, lane(), edge, kt.mask,
                                                     &bits_ahead, /*unscaled=*/true);
          FixedRefSoftmax<kMask>::probabilities(softmax, acc_s, logit_factor, fixed_ref);
        }
        return;
      }
      const bool unscaled = kt.mask == kMaskNone || kt.mask == kMaskBits;
      scores_to_logits<kSoftcap, kMask, kNTiles>(acc_s, p, tc.b, mask_rows, rows, n0, lane(), edge, kt.mask,
                                                 &bits_ahead, unscaled);
      softmax.exponentiate_mixed(acc_s, alpha, unscaled ? logit_factor : 1.f);
    } else {
      if constexpr (kFixedRef) {
        fixed_probabilities(p, acc_s, n0, edge, key_len);
        return;
      }
      scores_to_logits<kSoftcap, kMask, kNTiles>(acc_s, p, tc.b, mask_rows, rows, n0, lane(), edge, kt.mask,
                                                 nullptr, false, kCached ? key_len : -1);
      if constexpr (kCached) {
        // A left-padded sequence's keys before its first real one (AttentionParams::kv_starts) are hidden; a pad
        // row then sees nothing, and RowSoftmax gives it zeros.
        const int key_start = p.kv_starts != nullptr ? max(0, min(p.kv_starts[tc.b], key_len)) : 0;
        if (n0 < key_start) hide_before<kNTiles>(acc_s, n0 + 2 * (lane() & 3), key_start);
      }
      softmax.exponentiate(acc_s, alpha, scale);
    }
  }

 private:
  __device__ __forceinline__ static int lane() { return threadIdx.x % 32; }  // see the struct's comment

  // Where the work tile's keys end (keys from there on are hidden): cached + new tokens, or the sequence.
  __device__ __forceinline__ static int keys_end(const AttentionParams& p, const TileCoord& tc) {
    return kCached ? tc.key_len : p.seq_len;
  }

  __device__ __forceinline__ static int position(const TileCoord& tc, int i) {
    int head_unused, pos;
    row_of(tc, i, &head_unused, &pos);
    return kCached ? tc.p0 + pos : pos;
  }

  // FixedRefSoftmax in one pass from the raw dot products.
  template <int kN>
  __device__ __forceinline__ void fixed_probabilities(const AttentionParams& p, float (&s)[kN][4], int n0,
                                                      bool edge, int key_len) {
    // logit_factor (cap * log2 e), not `scale`: additive mode's `scale` is 1 (logit_scale).
    const float c = logit_factor, in = p.softcap_in, bias = p.fixed_bias;
    const int col0 = n0 + 2 * (lane() & 3);
    if (edge) {
      FixedRefSoftmax<kMask>::template softcap_probabilities<true>(softmax, s, in, c, bias, rows, col0, key_len,
                                                                   p.window);
    } else {
      FixedRefSoftmax<kMask>::template softcap_probabilities<false>(softmax, s, in, c, bias, rows, col0, key_len,
                                                                    p.window);
    }
  }
};

}  // namespace gk::gemma3
