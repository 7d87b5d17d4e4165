// Flash-attention forward for Hopper (sm_90a): warp-specialized, TMA-fed, wgmma.
//
// The grid is persistent at every sequence length: each CTA walks work tiles of 128 query rows of one (batch,
// query head), or a packed GQA tail, in the heaviest-first snake order of attention_scheduler.cuh.
//
// Warpgroup 0 is the producer: one thread decodes each tile into a shared-memory slot that the Q barrier's
// completion publishes to the consumers, and issues the TMA loads of its Q and of its K and V tiles (128 keys
// each) into a two-stage ring, each stage completing on an mbarrier and released by the consumers through
// another. The ring and its phases run on across work tiles, and the next tile's Q loads as soon as the
// consumers' last Q K^T of the current one has completed, so the loads of one tile overlap the last P*V and the
// output store of the previous.
//
// Warpgroups 1 and 2 are consumers, 64 query rows each: S = Q K^T with wgmma (both operands from shared memory),
// the softmax in registers (the sm_80 kernel's code: the wgmma accumulator layout is the mma.sync one; with a
// softcap and no mask values against a fixed reference instead of the running maximum, fixed_softmax.hpp: causal
// and no-mask mode, and from S = 2048 additive mode's blocks whose tile list shows no mask values and no row
// masked everywhere; in additive mode this kernel alone leaves tiles without mask values unscaled, their dead
// scores -inf where the tile list allows it, OnlineSoftmax::exponentiate_mixed or, on those bounded blocks, the
// fixed reference's exponent),
// then O += P V with wgmma taking P straight from registers and V from shared memory read transposed. Registers
// move from the producer to the consumers with setmaxnreg. The consumer warpgroups alternate their tensor-core
// phases (ping-pong), and each overlaps the softmax of one tile with the P*V of the previous.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"
#include "attention/tile_scheduler.cuh"
#include "attention/softmax.cuh"
#include "attention/params.hpp"

namespace gk::gemma3 {

struct Sm90Traits {
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = 128;
  static constexpr int kHeadDim = 128;
  static constexpr int kStages = 2;
  static constexpr int kThreads = 384;
  static constexpr int kBoxCols = 64;  // TMA box: 64 columns (128 bytes, one swizzle row) x 128 rows
  static constexpr int kBoxRows = 128;
  static constexpr uint32_t kBoxBytes = kBoxCols * kBoxRows * 2;  // 16 KB
  static constexpr uint32_t kTileBytes = 2 * kBoxBytes;           // a 128 x 128 bf16 tile as two column boxes
  static constexpr int kNumBarriers = 2 + 4 * kStages;            // Q full, Q empty; K, V full; K, V empty
  static constexpr uint32_t kOutBytes = 64 * 128 * 2;             // one consumer warpgroup's output rows (bf16)
  static constexpr size_t kSmemBytes =
      1024 + size_t(kTileBytes) * (1 + 2 * kStages) + 2 * size_t(kOutBytes) + 2 * kTileSlotBytes + 8 * kNumBarriers;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static constexpr int kConsumerWarps = 8;
  static_assert(kBlockM == kBoxRows && kBlockN == kBoxRows && kHeadDim == 2 * kBoxCols, "tile = two boxes");
};

// Column offsets (elements) of the K and V heads inside the packed q|k|v rows the tensor map covers.
struct Sm90Columns {
  int k_col;
  int v_col;
  bool o_tma;  // the output's heads are contiguous 128-element rows: whole tiles leave by TMA stores (out_map)
};

// A consumer warpgroup's 64 output rows, normalized and rounded to bf16, go through shared memory: written
// straight from the accumulator layout, each quad covered only 16 bytes of a row per store and half of every
// 32-byte sector went unused (ncu: 50% excess sectors). The staging buffer holds two boxes of 64 rows x 64
// columns (128 bytes a row) in the TMA's 128-byte swizzle (16-byte chunk c of row r at chunk c ^ (r % 8)), which
// also keeps the fragment writes and the row reads free of bank conflicts. An ordinary tile then leaves as two
// TMA stores issued by one thread, so the warpgroup goes on to its next tile instead of issuing 8 loads and
// stores a thread; a packed GQA tail (rows of several heads) leaves by 16-byte stores. Named barrier 3 + half
// guards the buffer: its first wait also covers the previous tile's reads (the issuing thread waits for its bulk
// stores to have read the buffer before arriving).
template <int kDTiles>
__device__ __forceinline__ void store_output_staged(const float (&acc_o)[kDTiles][4], const OnlineSoftmax& softmax,
                                                    const AttentionParams& p, const TileCoord& tc,
                                                    const CUtensorMap* out_map, bool o_tma, uint32_t stage,
                                                    int half) {
  static_assert(kDTiles == 16, "two 64-column boxes");
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32, g = lane >> 2, q = lane & 3;
  float inv_l[2];
  softmax.finalize(inv_l);
  device::staged_write_head(stage, 3 + half, warp * 16 + g, q, [&](int dt, int hh) {
    return device::pack_bf16x2(acc_o[dt][2 * hh] * inv_l[hh], acc_o[dt][2 * hh + 1] * inv_l[hh]);
  });
  if (o_tma && tc.tail_rows == 0) {
    device::staged_publish(3 + half);
    if (t == 0) {
      // Rows past the sequence end fall outside the tensor map and are not written.
      const int col = tc.h * 128, row = tc.m0 + half * 64;
      device::tma_store_3d(out_map, stage, col, row, tc.b);
      device::tma_store_3d(out_map, stage + device::kStagedBoxBytes, col + 64, row, tc.b);
      device::bulk_commit_group();
    }
    return;
  }
  device::named_barrier_sync(3 + half, 128);
  __nv_bfloat16* o = p.o + tc.b * p.o_batch_stride;
  // Rows past the sequence end, and a packed tail's rows past its heads' (tail_rows * group_size), are padding.
  const int rows = tc.tail_rows > 0 ? tc.tail_rows * p.group_size : 128;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int id = i * 128 + t, r = id / 16, c = id % 16;
    const uint4 v = device::ld_shared_v4(device::staged_chunk(stage, r, c));
    int head, pos;
    row_of(tc, half * 64 + r, &head, &pos);
    if (pos < p.seq_len && half * 64 + r < rows) {
      *reinterpret_cast<uint4*>(o + head * p.o_head_stride + int64_t(pos) * p.o_token_stride + c * 8) = v;
    }
  }
}

// kFixedRef (softcap): probabilities against the constant p.fixed_bias instead of the running row maximum
// (fixed_softmax.hpp), so a key tile's softmax is one pass of tanh and ex2 per score with nothing to reduce across
// the quad and no output rescale. In additive mode only the blocks whose tile list says their logits stay bounded
// (no mask values, no row dead everywhere: kListBounded) take it; the others keep the running maximum.
template <bool kSoftcap, MaskMode kMask, bool kFixedRef>
__global__ void __launch_bounds__(Sm90Traits::kThreads, 1)
    attention_sm90_kernel(const __grid_constant__ CUtensorMap qkv_map, const __grid_constant__ CUtensorMap tail_map,
                          const __grid_constant__ CUtensorMap out_map, const AttentionParams p,
                          const Sm90Columns cols) {
  using Tr = Sm90Traits;
  static_assert(!kFixedRef || kSoftcap, "logits bounded by the softcap");
  constexpr int kNTiles = Tr::kBlockN / 8;   // 16 n8 tiles of scores
  constexpr int kDTiles = Tr::kHeadDim / 8;  // 16 n8 tiles of output
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = device::smem_base_1024(smem_raw);
  const uint32_t s_q = base;
  const uint32_t s_k = s_q + Tr::kTileBytes;                  // kStages tiles
  const uint32_t s_v = s_k + Tr::kStages * Tr::kTileBytes;    // kStages tiles
  const uint32_t s_o = s_v + Tr::kStages * Tr::kTileBytes;    // 2 output staging buffers
  const uint32_t s_slots = s_o + 2 * Tr::kOutBytes;           // 2 decoded work tiles (16-byte aligned)
  const uint32_t bar = s_slots + 2 * kTileSlotBytes;          // 8-byte mbarriers
  const uint32_t q_full = bar;
  const uint32_t q_empty = bar + 8u;
  const auto k_full = [&](int s) { return bar + 8u * (2 + s); };
  const auto v_full = [&](int s) { return bar + 8u * (2 + Tr::kStages + s); };
  const auto k_empty = [&](int s) { return bar + 8u * (2 + 2 * Tr::kStages + s); };
  const auto v_empty = [&](int s) { return bar + 8u * (2 + 3 * Tr::kStages + s); };
  // The producer's decoded tile for the consumers' work tile `local`, in slot local % 2.
  const auto tile_slot = [&](int local) { return s_slots + kTileSlotBytes * (local & 1); };
  const int seq_len = p.seq_len;

  if (threadIdx.x == 0) {
    device::mbar_init(q_full, 1);
    device::mbar_init(q_empty, Tr::kConsumerWarps);
    for (int s = 0; s < Tr::kStages; ++s) {
      device::mbar_init(k_full(s), 1);
      device::mbar_init(v_full(s), 1);
      device::mbar_init(k_empty(s), Tr::kConsumerWarps);
      device::mbar_init(v_empty(s), Tr::kConsumerWarps);
    }
    device::mbar_fence_init();
  }
  __syncthreads();
  // Launched programmatically (behind the split projection kernel or the norm/RoPE pass, or in additive mode behind
  // the mask tile lists), the prologue above runs while that kernel still does; every role reads what the
  // kernels before wrote from here on. A no-op otherwise.
  device::grid_dependency_wait();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    // ---------------- producer ----------------
    device::regs_dealloc<Tr::kProducerRegs>();
    if (threadIdx.x == 0) {
      device::fence_proxy_async_global();  // the projection's ordinary stores before these TMA reads of them
      device::tma_prefetch_descriptor(&qkv_map);
      device::tma_prefetch_descriptor(&tail_map);
      int it = 0;  // K/V tiles loaded so far: ring stage and phase
      // The producer decodes each tile into the consumers' slot as soon as it has it, and reads it back there
      // when it starts the tile (the grid has at most num_tiles CTAs, so the first tile exists).
      write_tile<kMask>(tile_slot(0), persistent_tile(0),
                        tile_coord<kMask, Tr::kBlockM, Tr::kBlockN, kFixedRef>(p, persistent_tile(0)));
      for (int local = 0;; ++local) {
        if (local > 0) device::mbar_wait(q_empty, (local - 1) & 1);
        TileCoord tc;
        if (read_tile<kMask>(tile_slot(local), p, &tc) >= p.num_tiles) {
          device::mbar_arrive(q_full);  // no loads: the consumers read the slot and stop
          break;
        }
        if (tc.tail_rows == 0) {
          const int q_col = tc.h * Tr::kHeadDim;
          device::mbar_arrive_expect_tx(q_full, Tr::kTileBytes);
          device::tma_load_3d(s_q, &qkv_map, q_full, q_col, tc.m0, tc.b);
          device::tma_load_3d(s_q + Tr::kBoxBytes, &qkv_map, q_full, q_col + Tr::kBoxCols, tc.m0, tc.b);
        } else {
          // Head j's tail_rows rows land at row j * tail_rows of both boxes (a multiple of 8 rows keeps each load
          // on the 1024-byte swizzle atom); rows past the sequence end read as zeros.
          const uint32_t head_bytes = uint32_t(tc.tail_rows) * 128u;
          device::mbar_arrive_expect_tx(q_full, 2u * p.group_size * head_bytes);
          for (int j = 0; j < p.group_size; ++j) {
            const int q_col = (tc.h + j) * Tr::kHeadDim;
            device::tma_load_3d(s_q + j * head_bytes, &tail_map, q_full, q_col, tc.m0, tc.b);
            device::tma_load_3d(s_q + Tr::kBoxBytes + j * head_bytes, &tail_map, q_full, q_col + Tr::kBoxCols,
                                tc.m0, tc.b);
          }
        }
        const int k_col = cols.k_col + tc.kvh * Tr::kHeadDim;
        const int v_col = cols.v_col + tc.kvh * Tr::kHeadDim;
        for (int nb = 0; nb < tc.n_blocks; ++nb, ++it) {
          const int s = it % Tr::kStages;
          const int round = it / Tr::kStages;
          const int n0 = key_tile<kMask, Tr::kBlockN>(tc, nb, 0).n0;
          const uint32_t k_tile = s_k + s * Tr::kTileBytes, v_tile = s_v + s * Tr::kTileBytes;
          if (round > 0) device::mbar_wait(k_empty(s), (round - 1) & 1);
          device::mbar_arrive_expect_tx(k_full(s), Tr::kTileBytes);
          device::tma_load_3d(k_tile, &qkv_map, k_full(s), k_col, n0, tc.b);
          device::tma_load_3d(k_tile + Tr::kBoxBytes, &qkv_map, k_full(s), k_col + Tr::kBoxCols, n0, tc.b);
          if (round > 0) device::mbar_wait(v_empty(s), (round - 1) & 1);
          device::mbar_arrive_expect_tx(v_full(s), Tr::kTileBytes);
          device::tma_load_3d(v_tile, &qkv_map, v_full(s), v_col, n0, tc.b);
          device::tma_load_3d(v_tile + Tr::kBoxBytes, &qkv_map, v_full(s), v_col + Tr::kBoxCols, n0, tc.b);
          if (it == 0 && p.l2_prefetch_bytes != 0) {  // behind this CTA's first loads
            device::bulk_prefetch_l2_share(p.l2_prefetch, p.l2_prefetch_bytes, blockIdx.x, gridDim.x);
          }
        }
        // The next tile is decoded into its slot while the ring still holds this one's last key tiles, so the
        // divisions stay off the path from the Q barrier's release to the next Q load. Slot (local + 1) % 2 is
        // free: the consumers read it at the start of tile local - 1, before they released Q for this tile's load.
        const int next = persistent_tile(local + 1);
        TileCoord nc{};
        if (next < p.num_tiles) nc = tile_coord<kMask, Tr::kBlockM, Tr::kBlockN, kFixedRef>(p, next);
        write_tile<kMask>(tile_slot(local + 1), next, nc);
      }
    }
    return;
  }

  // ---------------- consumers ----------------
  device::regs_alloc<Tr::kConsumerRegs>();
  const int half_block = warpgroup - 1;  // which 64 rows of the 128
  const int warp = (threadIdx.x / 32) % 4;
  const int lane = threadIdx.x % 32;
  // This warpgroup's 64 rows start 64 * 128 bytes into each Q box.
  const uint32_t q_rows = s_q + half_block * 64 * 128;

  float acc_o[kDTiles][4];
  float acc_s[kNTiles][4];
  uint32_t p_frag[kNTiles / 2][4];

  // `g` counts K/V tiles across the CTA's work tiles, as the producer does.
  const auto stage = [](int g) { return g % Tr::kStages; };
  const auto parity = [](int g) { return uint32_t(g / Tr::kStages) & 1u; };
  // Shared-memory descriptors are built once; a tile, stage or k-step offset is then a plain add to the
  // address field (addresses stay below 256 KB, so the 14-bit field never carries). Rebuilding each from its
  // address was most of the ~170 integer and uniform instructions per key tile ncu counted in the loop (a quarter
  // of it); the time did not move either way (docs/perf-log.md v6.3).
  const uint64_t q_desc = device::smem_desc_sw128(q_rows, 16, 1024);
  const uint64_t k_desc = device::smem_desc_sw128(s_k, 16, 1024);
  // V is [keys][dims], dims contiguous: an MN-major B operand whose second 64 dims sit one box (16 KB) further.
  const uint64_t v_desc = device::smem_desc_sw128(s_v, Tr::kBoxBytes, 1024);
  const auto desc_at = [](uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); };
  const auto issue_qk = [&](int g) {
    const uint64_t k_tile = desc_at(k_desc, stage(g) * Tr::kTileBytes);
    device::mbar_wait(k_full(stage(g)), parity(g));
    device::wgmma_fence();
#pragma unroll
    for (int k = 0; k < Tr::kHeadDim / 16; ++k) {
      // 16 columns = 32 bytes along the swizzled row; columns 64..127 live in the second box.
      const uint32_t off = (k / 4) * Tr::kBoxBytes + (k % 4) * 32;
      device::wgmma_m64n128k16_ss(acc_s, desc_at(q_desc, off), desc_at(k_tile, off), k > 0);
    }
    device::wgmma_commit();
  };
  const auto issue_pv = [&](int g) {
    const uint64_t v_tile = desc_at(v_desc, stage(g) * Tr::kTileBytes);
    device::mbar_wait(v_full(stage(g)), parity(g));
    device::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Tr::kBlockN / 16; ++kk) {
      // 16 keys = 2048 bytes down the tile.
      device::wgmma_m64n128k16_rs_tb(acc_o, p_frag[kk], desc_at(v_tile, kk * 16 * 128), 1);
    }
    device::wgmma_commit();
  };
  const auto release = [&](uint32_t empty_bar) {
    if (lane == 0) device::mbar_arrive(empty_bar);
  };

  // The two consumer warpgroups take turns issuing their tensor-core work (named barriers 1 and 2), so one's
  // softmax runs while the other's GEMMs occupy the tensor cores. Within a warpgroup, the softmax of tile j
  // overlaps its own P*V of tile j-1. Both warpgroups take the same number of turns per work tile, so the
  // alternation carries over from one work tile to the next.
  constexpr int kSchedThreads = 2 * 128;
  const int my_turn = 1 + half_block, other_turn = 2 - half_block;
  const float scale = logit_scale<kSoftcap, kMask>(p);
  // The factor an additive mask's unscaled tiles leave to the softmax (what the other modes' `scale` is).
  const float logit_factor = kSoftcap ? p.softcap_out : p.scale_log2;
  const float fixed_ref[2] = {p.fixed_bias, p.fixed_bias};
  if (half_block == 1) device::named_barrier_arrive(other_turn, kSchedThreads);  // the first half goes first

  int g0 = 0;  // K/V tiles consumed before this work tile
  for (int local = 0;; ++local) {
    device::mbar_wait(q_full, local & 1);
    TileCoord tc;
    if (read_tile<kMask>(tile_slot(local), p, &tc) >= p.num_tiles) break;
    const int n_blocks = tc.n_blocks;
    // This warpgroup's first query position (a packed tail's rows all start at m0), and the thread's two rows.
    const int wg_pos0 = tc.tail_rows > 0 ? tc.m0 : tc.m0 + half_block * 64;
    int rows[2], head_unused;
    row_of(tc, half_block * 64 + warp * 16 + (lane >> 2), &head_unused, &rows[0]);
    row_of(tc, half_block * 64 + warp * 16 + (lane >> 2) + 8, &head_unused, &rows[1]);
    const __nv_bfloat16* mask_rows = nullptr;
    if constexpr (kMask == MaskMode::kAdditive) mask_rows = p.mask + tc.b * p.mask_batch_stride;
    // The key tile is looked up before the wait on its scores, and a bits tile's live words (additive mode) are
    // loaded then, used after the wait. An additive tile list's entry is read a whole key tile ahead (the first two
    // come in the slot): the branch on its kind waited for a load per key tile (ncu at (4, 2053): ~4% of the loop's
    // stall samples).
    uint64_t bits_ahead[2][2];
    uint32_t entry_ahead = tc.entries[1];
    OnlineSoftmax softmax;
    const bool fixed_tile = kFixedRef && (kMask != MaskMode::kAdditive || tc.bounded);
    // The fixed reference's softmax in one pass from the raw dot products (OnlineSoftmax::softcap_probabilities).
    const auto fixed_probabilities = [&](auto& s, int n0, bool edge) {
      constexpr bool kCausal = kMask == MaskMode::kCausal;
      // logit_factor (cap * log2 e), not `scale`: additive mode's `scale` is 1 (logit_scale).
      const float c = logit_factor, in = p.softcap_in, bias = p.fixed_bias;
      const int col0 = n0 + 2 * (lane & 3);
      if (edge) {
        softmax.softcap_probabilities<true, kCausal>(s, in, c, bias, rows, col0, seq_len);
      } else {
        softmax.softcap_probabilities<false, kCausal>(s, in, c, bias, rows, col0, seq_len);
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
    // Scores to logits, then to probabilities (the fixed reference: in one pass, fixed_probabilities). An additive
    // mask's tile without mask values whose dead scores may be -inf stays unscaled and the softmax's FFMA applies
    // the factor, as in the other modes (scores_to_logits).
    const auto logits_and_exponentiate = [&](const KeyTile& kt, float (&alpha)[2]) {
      const int n0 = kt.n0;
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
            softmax.probabilities(acc_s, logit_factor, fixed_ref);
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
    // Q is free for the next work tile once this tile's last Q K^T has completed.
    const auto after_qk = [&](int nb) {
      release(k_empty(stage(g0 + nb)));
      if (nb == n_blocks - 1) release(q_empty);
    };

#pragma unroll
    for (int i = 0; i < kDTiles; ++i) acc_o[i][0] = acc_o[i][1] = acc_o[i][2] = acc_o[i][3] = 0.f;

    const KeyTile first = key(0);
    // Causal mode starts with the diagonal tile. Its keys past the 64th lie right of the diagonal for every row of
    // the block's first half, and for every row of a packed tail (tail_rows <= 64, all of its heads' rows at
    // positions m0 .. m0 + tail_rows - 1), so the first consumer warpgroup's softmax, and both of a packed tail's,
    // take the tile's first 64 keys only (half their special-function work there) and give the rest probability 0.
    // The wgmma stay full width: a 64-key Q K^T for one warpgroup made ptxas serialize every wgmma of the kernel
    // (C7515), as did skipping half of its P*V (C7511).
    const bool half_keys = kMask == MaskMode::kCausal && (half_block == 0 || tc.tail_rows > 0);
    device::named_barrier_sync(my_turn, kSchedThreads);
    issue_qk(g0);
    device::named_barrier_arrive(other_turn, kSchedThreads);
    device::wgmma_wait<0>();
    device::fence_accumulators(acc_s);
    after_qk(0);
    float alpha[2];
    // The output is still zero: nothing to rescale.
    if (half_keys) {
      auto& acc_s_half = reinterpret_cast<float(&)[kNTiles / 2][4]>(acc_s);  // the first 8 n8 tiles
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
      device::named_barrier_sync(my_turn, kSchedThreads);
      issue_qk(g0 + nb);
      issue_pv(g0 + nb - 1);
      device::named_barrier_arrive(other_turn, kSchedThreads);
      device::wgmma_wait<1>();  // S of tile nb is ready; P*V of tile nb-1 may still run
      device::fence_accumulators(acc_s);
      after_qk(nb);
      logits_and_exponentiate(kt, alpha);
      device::wgmma_wait<0>();
      device::fence_accumulators(acc_o);
      release(v_empty(stage(g0 + nb - 1)));
      if (!fixed_tile) OnlineSoftmax::rescale(acc_o, alpha);
      pack_p(acc_s, p_frag);
    }

    device::named_barrier_sync(my_turn, kSchedThreads);
    issue_pv(g0 + n_blocks - 1);
    device::named_barrier_arrive(other_turn, kSchedThreads);
    device::wgmma_wait<0>();
    device::fence_accumulators(acc_o);
    release(v_empty(stage(g0 + n_blocks - 1)));

    store_output_staged(acc_o, softmax, p, tc, &out_map, cols.o_tma, s_o + half_block * Tr::kOutBytes, half_block);
    g0 += n_blocks;
  }
  // The last tile's TMA stores read this CTA's shared memory: they finish before it exits.
  if (threadIdx.x % 128 == 0) device::bulk_wait_all();
}

}  // namespace gk::gemma3
