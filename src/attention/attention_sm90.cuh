// Flash-attention forward for Hopper (sm_90a): warp-specialized, TMA-fed, wgmma. The kernel below is the schedule;
// its parts, one role each:
//   sm90_traits.cuh     the shape (Sm90AttentionTraits), the shared-memory map and barriers (Sm90Smem)
//   tile_scheduler.cuh  the persistent grid's heaviest-first snake order, the work tile decode and its slots
//   sm90_producer.cuh   warpgroup 0: the tile decode into the consumers' slot, the TMA loads of Q, K and V
//   sm90_mainloop.cuh   the consumers' tensor-core work (Q K^T, P V) and the warpgroups' turn-taking
//   sm90_scores.cuh     a work tile's scores (Sm90TileScores): the next key tile (an additive tile list read ahead),
//                       each tile's probabilities under the mask and the softmax policy it takes
//   mask_policy.cuh     the mask (MaskPolicy: visible keys, visited key tiles, edge tiles) and the additive values
//   softmax.cuh         the softmax policies: RowSoftmax (running row maximum), FixedRefSoftmax (fixed reference)
//   sm90_epilogue.cuh   the output store: staged, then by TMA or 16-byte stores
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
#include "attention/sm90_scores.cuh"
#include "attention/sm90_traits.cuh"
#include "attention/softmax.cuh"
#include "attention/tile_scheduler.cuh"

namespace gk::gemma3 {

// kFixedRef (softcap): the fixed-reference softmax where it applies (FixedRefSoftmax, fixed_softmax.hpp).
// kCached: the new tokens' queries over a key/value cache (AttentionParams::kv_lens), whose keys and values the
// producer reads through k_cache_map and v_cache_map (unused otherwise); causal or sliding-window masking, one work
// tile per head (no packed tails), left padding (kv_starts) hidden per tile.
template <bool kSoftcap, MaskMode kMask, bool kFixedRef, class Tr = Sm90Traits, bool kCached = false>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    attention_sm90_kernel(const __grid_constant__ CUtensorMap qkv_map, const __grid_constant__ CUtensorMap tail_map,
                          const __grid_constant__ CUtensorMap out_map, const __grid_constant__ CUtensorMap k_cache_map,
                          const __grid_constant__ CUtensorMap v_cache_map, const AttentionParams p,
                          const Sm90Columns cols) {
  static_assert(!kFixedRef || kSoftcap, "logits bounded by the softcap");
  static_assert(!kCached || kMask == MaskMode::kCausal || kMask == MaskMode::kSliding,
                "a cache takes causal or sliding-window masking here");
  constexpr int kNTiles = Tr::kNTiles, kDTiles = Tr::kDTiles;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = device::smem_base_1024(smem_raw);

  if (threadIdx.x == 0) Sm90Smem<Tr>(base).init_barriers();
  __syncthreads();
  // Launched programmatically (behind the split projection kernel or the norm/RoPE pass, or in additive mode behind
  // the mask tile lists), the prologue above runs while that kernel still does; every role reads what the
  // kernels before wrote from here on. A no-op otherwise.
  device::grid_dependency_wait();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    device::regs_dealloc<Tr::kProducerRegs>();
    if (threadIdx.x == 0) {
      Sm90Producer<Tr, kMask, kFixedRef, kCached>::run(Sm90Smem<Tr>(base), &qkv_map, &tail_map, &k_cache_map,
                                                       &v_cache_map, p, cols);
    }
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
  mma.start_turns();

  int g0 = 0;  // K/V tiles consumed before this work tile: the ring's use count, as the producer keeps it
  for (int local = 0;; ++local) {
    smem.q_pipe.consumer_wait(local);
    TileCoord tc;
    if (read_tile<kMask, kCached>(smem.tile_slot(local), p, &tc) >= p.num_tiles) break;
    const int n_blocks = tc.n_blocks;
    Sm90TileScores<Tr, kSoftcap, kMask, kFixedRef, kCached> scores(p, tc, half_block, warp);
#pragma unroll
    for (int i = 0; i < kDTiles; ++i) acc_o[i][0] = acc_o[i][1] = acc_o[i][2] = acc_o[i][3] = 0.f;

    const KeyTile first = scores.first_key(p, tc);
    // With a cache, the first key tile (the diagonal one: MaskPolicy::key_tile) is the only one that may reach past
    // the keys; the first warpgroup, whose P*V of it comes first (the turns start with it on every work tile),
    // zeroes those rows of V before it.
    const int clear_from = kCached && half_block == 0 ? tc.key_len - first.n0 : Tr::kBlockN;
    mma.first_qk(acc_s, g0, n_blocks);
    float alpha[2];
    scores.first_step(p, tc, first, acc_s, alpha);
    pack_p(acc_s, p_frag);

    for (int nb = 1; nb < n_blocks; ++nb) {
      const KeyTile kt = scores.next_key(p, tc, nb);
      mma.next_qk_prev_pv(acc_s, acc_o, p_frag, g0, nb, n_blocks, nb == 1 ? clear_from : Tr::kBlockN);
      scores.step(p, tc, kt, acc_s, alpha);
      mma.wait_pv(acc_o, g0 + nb - 1);
      if (!scores.fixed_tile) RowSoftmax::rescale(acc_o, alpha);
      pack_p(acc_s, p_frag);
    }

    mma.last_pv(acc_o, p_frag, g0 + n_blocks - 1, n_blocks == 1 ? clear_from : Tr::kBlockN);

    Sm90Epilogue<Tr>::store(acc_o, scores.softmax, p, tc, &out_map, cols.o_tma, smem.out_stage(half_block),
                            smem.out_free(), local, half_block);
    g0 += n_blocks;
  }
  // The last tile's TMA stores read this CTA's shared memory: they finish before it exits.
  if (threadIdx.x % 128 == 0) device::bulk_wait_all();
}

}  // namespace gk::gemma3
