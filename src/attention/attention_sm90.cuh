// Flash-attention forward for Hopper (sm_90a): warp-specialized, TMA-fed, wgmma. The kernel below is the schedule;
// its parts, one role each:
//   sm90_traits.cuh     the shape (Sm90AttentionTraits), the shared-memory map and barriers (Sm90Smem)
//   tile_scheduler.cuh  the persistent grid's heaviest-first snake order, the work tile decode and its slots
//   sm90_producer.cuh   warpgroup 0: the tile decode into the consumers' slot, the TMA loads of Q, K and V
//   sm90_mainloop.cuh   the consumers' tensor-core work (Q K^T, P V) and the warpgroups' turn-taking
//   mask_policy.cuh     the mask (MaskPolicy: visible keys, visited key tiles, edge tiles) and the additive values
//   softmax.cuh         the softmax policies: RowSoftmax (running row maximum), FixedRefSoftmax (fixed reference)
//   sm90_epilogue.cuh   the output store: staged, then by TMA or 16-byte stores
//
// The kernel body keeps the per-work-tile glue between the last two: which key tile comes next (with an additive
// tile list read ahead), and which softmax form a tile takes.
//
// The grid is persistent at every sequence length: each CTA walks work tiles of kBlockM query rows of one (batch,
// query head), or a packed GQA tail. Warpgroups 1 and 2 are consumers, 64 query rows each; registers move from the
// producer to them with setmaxnreg. The consumer warpgroups alternate their tensor-core phases (ping-pong), and each
// overlaps the softmax of one key tile with the P*V of the previous.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"
#include "attention/params.hpp"
#include "attention/sm90_epilogue.cuh"
#include "attention/sm90_mainloop.cuh"
#include "attention/sm90_producer.cuh"
#include "attention/sm90_traits.cuh"
#include "attention/softmax.cuh"
#include "attention/tile_scheduler.cuh"

namespace gk::gemma3 {

// kFixedRef (softcap): the fixed-reference softmax where it applies (FixedRefSoftmax, fixed_softmax.hpp).
template <bool kSoftcap, MaskMode kMask, bool kFixedRef, class Tr = Sm90Traits>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    attention_sm90_kernel(const __grid_constant__ CUtensorMap qkv_map, const __grid_constant__ CUtensorMap tail_map,
                          const __grid_constant__ CUtensorMap out_map, const AttentionParams p,
                          const Sm90Columns cols) {
  static_assert(!kFixedRef || kSoftcap, "logits bounded by the softcap");
  constexpr int kNTiles = Tr::kNTiles, kDTiles = Tr::kDTiles;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = device::smem_base_1024(smem_raw);
  const int seq_len = p.seq_len;

  if (threadIdx.x == 0) Sm90Smem<Tr>(base).init_barriers();
  __syncthreads();
  // Launched programmatically (behind the split projection kernel or the norm/RoPE pass, or in additive mode behind
  // the mask tile lists), the prologue above runs while that kernel still does; every role reads what the
  // kernels before wrote from here on. A no-op otherwise.
  device::grid_dependency_wait();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    device::regs_dealloc<Tr::kProducerRegs>();
    if (threadIdx.x == 0) Sm90Producer<Tr, kMask, kFixedRef>::run(Sm90Smem<Tr>(base), &qkv_map, &tail_map, p, cols);
    return;
  }

  // Consumers: warpgroups 1 and 2, kConsumerRows query rows each.
  device::regs_alloc<Tr::kConsumerRegs>();
  const int half_block = warpgroup - 1;  // which rows of the block
  const int warp = (threadIdx.x / 32) % 4;
  const int lane = threadIdx.x % 32;

  float acc_o[kDTiles][4];
  float acc_s[kNTiles][4];
  uint32_t p_frag[kNTiles / 2][4];

  const Sm90Smem<Tr> smem(base);
  const Sm90Mainloop<Tr> mma(smem, half_block, lane);
  const float scale = logit_scale<kSoftcap, kMask>(p);  // RowSoftmax's factor
  // The factor an additive mask's unscaled tiles leave to the softmax (what the other modes' `scale` is).
  const float logit_factor = kSoftcap ? p.softcap_out : p.scale_log2;
  const float fixed_ref[2] = {p.fixed_bias, p.fixed_bias};  // FixedRefSoftmax's reference
  mma.start_turns();

  int g0 = 0;  // K/V tiles consumed before this work tile: the ring's use count, as the producer keeps it
  for (int local = 0;; ++local) {
    smem.q_pipe.consumer_wait(local);
    TileCoord tc;
    if (read_tile<kMask>(smem.tile_slot(local), p, &tc) >= p.num_tiles) break;
    const int n_blocks = tc.n_blocks;
    // This warpgroup's first query position (a packed tail's rows all start at m0), and the thread's two rows.
    const int wg_pos0 = tc.tail_rows > 0 ? tc.m0 : tc.m0 + half_block * Tr::kConsumerRows;
    int rows[2], head_unused;
    row_of(tc, half_block * Tr::kConsumerRows + warp * 16 + (lane >> 2), &head_unused, &rows[0]);
    row_of(tc, half_block * Tr::kConsumerRows + warp * 16 + (lane >> 2) + 8, &head_unused, &rows[1]);
    const __nv_bfloat16* mask_rows = nullptr;
    if constexpr (kMask == MaskMode::kAdditive) mask_rows = p.mask + tc.b * p.mask_batch_stride;
    // The key tile is looked up before the wait on its scores, and a bits tile's live words (additive mode) are
    // loaded then, used after the wait. An additive tile list's entry is read a whole key tile ahead (the first two
    // come in the slot), so that the branch on its kind does not wait for a load per key tile (docs/perf-log.md v18).
    uint64_t bits_ahead[2][2];
    uint32_t entry_ahead = tc.entries[1];
    RowSoftmax softmax;  // its sums serve FixedRefSoftmax's tiles too
    const bool fixed_tile = kFixedRef && (kMask != MaskMode::kAdditive || tc.bounded);
    // FixedRefSoftmax in one pass from the raw dot products.
    const auto fixed_probabilities = [&](auto& s, int n0, bool edge) {
      // logit_factor (cap * log2 e), not `scale`: additive mode's `scale` is 1 (logit_scale).
      const float c = logit_factor, in = p.softcap_in, bias = p.fixed_bias;
      const int col0 = n0 + 2 * (lane & 3);
      if (edge) {
        FixedRefSoftmax<kMask>::template softcap_probabilities<true>(softmax, s, in, c, bias, rows, col0, seq_len);
      } else {
        FixedRefSoftmax<kMask>::template softcap_probabilities<false>(softmax, s, in, c, bias, rows, col0, seq_len);
      }
    };
    const auto key = [&](int nb) {
      if constexpr (kMask == MaskMode::kAdditive) {
        uint32_t e = tc.entries[0];
        if (nb > 0) {
          e = entry_ahead;
          entry_ahead = tc.list[min(nb + 1, n_blocks - 1)];
        }
        const KeyTile kt = decode_key_entry<Tr::kBlockN>(tc, e, half_block);
        if (mask_apply_bits(kt.mask)) load_mask_bits<kNTiles>(bits_ahead, p, tc.b, rows, kt.n0);
        return kt;
      } else {
        return key_tile<kMask, Tr::kBlockN>(tc, nb, half_block);
      }
    };
    // Scores to logits under the mask policy, then to probabilities under the tile's softmax policy (FixedRefSoftmax:
    // in one pass, fixed_probabilities). In additive mode this kernel alone leaves a tile without mask values
    // unscaled, its dead scores -inf where the tile list allows it, and the softmax's FFMA applies the factor, as
    // in the other modes (scores_to_logits); a block takes FixedRefSoftmax only where its tile list says its logits
    // stay bounded (kListBounded), the running maximum elsewhere.
    const auto logits_and_exponentiate = [&](const KeyTile& kt, float (&alpha)[2]) {
      const int n0 = kt.n0;
      // An edge tile may hold keys the mask policy hides from these rows (MaskPolicy::hide): past the sequence end,
      // or (causal) right of the warpgroup's first row.
      const bool edge =
          (n0 + Tr::kBlockN > seq_len) || (kMask == MaskMode::kCausal && n0 + Tr::kBlockN - 1 > wg_pos0);
      if constexpr (kMask == MaskMode::kAdditive) {
        if (fixed_tile) {
          // A bounded block's tiles are kMaskNone or kMaskBits, and no row is dead everywhere: dead scores -inf.
          if (kt.mask == kMaskNone) {
            fixed_probabilities(acc_s, n0, edge);
          } else {
            scores_to_logits<kSoftcap, kMask, kNTiles>(acc_s, p, tc.b, mask_rows, rows, n0, lane, edge, kt.mask,
                                                       &bits_ahead, /*unscaled=*/true);
            FixedRefSoftmax<kMask>::probabilities(softmax, acc_s, logit_factor, fixed_ref);
          }
          return;
        }
        const bool unscaled = kt.mask == kMaskNone || kt.mask == kMaskBits;
        scores_to_logits<kSoftcap, kMask, kNTiles>(acc_s, p, tc.b, mask_rows, rows, n0, lane, edge, kt.mask,
                                                   &bits_ahead, unscaled);
        softmax.exponentiate_mixed(acc_s, alpha, unscaled ? logit_factor : 1.f);
      } else {
        if constexpr (kFixedRef) {
          fixed_probabilities(acc_s, n0, edge);
          return;
        }
        scores_to_logits<kSoftcap, kMask, kNTiles>(acc_s, p, tc.b, mask_rows, rows, n0, lane, edge, kt.mask);
        softmax.exponentiate(acc_s, alpha, scale);
      }
    };
#pragma unroll
    for (int i = 0; i < kDTiles; ++i) acc_o[i][0] = acc_o[i][1] = acc_o[i][2] = acc_o[i][3] = 0.f;

    const KeyTile first = key(0);
    // Causal mode starts with the diagonal tile (MaskPolicy::key_tile). Its keys past the 64th lie right of the
    // diagonal for every row of the block's first half, and for every row of a packed tail (tail_rows <= 64, all of its
    // heads' rows at positions m0 .. m0 + tail_rows - 1), so the first consumer warpgroup's softmax, and both of a
    // packed tail's, take the tile's first 64 keys only (half their special-function work there) and give the rest
    // probability 0. The wgmma stay full width: a 64-key Q K^T for one warpgroup made ptxas serialize every wgmma of
    // the kernel (C7515), as did skipping half of its P*V (C7511).
    const bool half_keys = kMask == MaskMode::kCausal && (half_block == 0 || tc.tail_rows > 0);
    mma.first_qk(acc_s, g0, n_blocks);
    float alpha[2];
    // The output is still zero: nothing to rescale.
    if (half_keys) {
      static_assert(Tr::kBlockN == 2 * Tr::kConsumerRows, "half the diagonal tile: one warpgroup's rows");
      auto& acc_s_half = reinterpret_cast<float(&)[kNTiles / 2][4]>(acc_s);  // the first half of the n8 tiles
      if constexpr (kFixedRef) {
        fixed_probabilities(acc_s_half, first.n0, true);
      } else {
        scores_to_logits<kSoftcap, kMask, kNTiles / 2>(acc_s_half, p, tc.b, mask_rows, rows, first.n0, lane, true,
                                                       first.mask);
        softmax.exponentiate(acc_s_half, alpha, scale);
      }
#pragma unroll
      for (int nt = kNTiles / 2; nt < kNTiles; ++nt) acc_s[nt][0] = acc_s[nt][1] = acc_s[nt][2] = acc_s[nt][3] = 0.f;
    } else {
      logits_and_exponentiate(first, alpha);
    }
    pack_p(acc_s, p_frag);

    for (int nb = 1; nb < n_blocks; ++nb) {
      const KeyTile kt = key(nb);
      mma.next_qk_prev_pv(acc_s, acc_o, p_frag, g0, nb, n_blocks);
      logits_and_exponentiate(kt, alpha);
      mma.wait_pv(acc_o, g0 + nb - 1);
      if (!fixed_tile) RowSoftmax::rescale(acc_o, alpha);
      pack_p(acc_s, p_frag);
    }

    mma.last_pv(acc_o, p_frag, g0 + n_blocks - 1);

    Sm90Epilogue<Tr>::store(acc_o, softmax, p, tc, &out_map, cols.o_tma, smem.out_stage(half_block), half_block);
    g0 += n_blocks;
  }
  // The last tile's TMA stores read this CTA's shared memory: they finish before it exits.
  if (threadIdx.x % 128 == 0) device::bulk_wait_all();
}

}  // namespace gk::gemma3
