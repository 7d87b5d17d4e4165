// Flash-attention forward for Hopper (sm_90a): warp-specialized, TMA-fed, wgmma.
//
// One CTA owns 128 query rows of one (batch, query head). Warpgroup 0 is the producer: one thread issues TMA
// loads of Q once and of K and V tiles (128 keys each) into a two-stage shared-memory ring, each stage completing
// on an mbarrier and released by the consumers through another. Warpgroups 1 and 2 are consumers, 64 query rows
// each: S = Q K^T with wgmma (both operands from shared memory), the online softmax in registers (the same code as
// the sm_80 kernel: the wgmma accumulator layout is the mma.sync one), then O += P V with wgmma taking P straight
// from registers and V from shared memory read transposed. Registers move from the producer to the consumers
// with setmaxnreg. The consumer warpgroups alternate their tensor-core phases (ping-pong), and each overlaps
// the softmax of one tile with the P*V of the previous.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"
#include "gemma3_attention/attention_scheduler.cuh"
#include "gemma3_attention/attention_softmax.cuh"
#include "gemma3_attention/params.hpp"

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
  static constexpr int kNumBarriers = 1 + 4 * kStages;            // Q full; K, V full; K, V empty
  static constexpr size_t kSmemBytes = 1024 + size_t(kTileBytes) * (1 + 2 * kStages) + 8 * kNumBarriers;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static constexpr int kConsumerWarps = 8;
  static_assert(kBlockM == kBoxRows && kBlockN == kBoxRows && kHeadDim == 2 * kBoxCols, "tile = two boxes");
};

// Column offsets (elements) of the K and V heads inside the packed q|k|v rows the tensor map covers.
struct Sm90Columns {
  int k_col;
  int v_col;
};

template <bool kSoftcap, MaskMode kMask>
__global__ void __launch_bounds__(Sm90Traits::kThreads, 1)
    attention_sm90_kernel(const __grid_constant__ CUtensorMap qkv_map, const AttentionParams p, const Sm90Columns cols) {
  using Tr = Sm90Traits;
  constexpr int kNTiles = Tr::kBlockN / 8;   // 16 n8 tiles of scores
  constexpr int kDTiles = Tr::kHeadDim / 8;  // 16 n8 tiles of output
  extern __shared__ unsigned char smem_raw[];
  // 128-byte swizzled tiles need 1024-byte alignment.
  const uint32_t base = (device::smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t s_q = base;
  const uint32_t s_k = s_q + Tr::kTileBytes;                  // kStages tiles
  const uint32_t s_v = s_k + Tr::kStages * Tr::kTileBytes;    // kStages tiles
  const uint32_t bar = s_v + Tr::kStages * Tr::kTileBytes;    // 8-byte mbarriers
  const uint32_t q_full = bar;
  const auto k_full = [&](int s) { return bar + 8u * (1 + s); };
  const auto v_full = [&](int s) { return bar + 8u * (1 + Tr::kStages + s); };
  const auto k_empty = [&](int s) { return bar + 8u * (1 + 2 * Tr::kStages + s); };
  const auto v_empty = [&](int s) { return bar + 8u * (1 + 3 * Tr::kStages + s); };

  const TileCoord tc = tile_coord<kMask, Tr::kBlockM, Tr::kBlockN>(p);
  const int b = tc.b, h = tc.h, kvh = tc.kvh, m0 = tc.m0, n_blocks = tc.n_blocks;
  const int seq_len = p.seq_len;

  if (threadIdx.x == 0) {
    device::mbar_init(q_full, 1);
    for (int s = 0; s < Tr::kStages; ++s) {
      device::mbar_init(k_full(s), 1);
      device::mbar_init(v_full(s), 1);
      device::mbar_init(k_empty(s), Tr::kConsumerWarps);
      device::mbar_init(v_empty(s), Tr::kConsumerWarps);
    }
    device::mbar_fence_init();
  }
  __syncthreads();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    // ---------------- producer ----------------
    device::regs_dealloc<Tr::kProducerRegs>();
    if (threadIdx.x == 0) {
      device::tma_prefetch_descriptor(&qkv_map);
      const int q_col = h * Tr::kHeadDim;
      const int k_col = cols.k_col + kvh * Tr::kHeadDim;
      const int v_col = cols.v_col + kvh * Tr::kHeadDim;
      device::mbar_arrive_expect_tx(q_full, Tr::kTileBytes);
      device::tma_load_3d(s_q, &qkv_map, q_full, q_col, m0, b);
      device::tma_load_3d(s_q + Tr::kBoxBytes, &qkv_map, q_full, q_col + Tr::kBoxCols, m0, b);
      for (int nb = 0; nb < n_blocks; ++nb) {
        const int s = nb % Tr::kStages;
        const int round = nb / Tr::kStages;
        const int n0 = nb * Tr::kBlockN;
        if (round > 0) device::mbar_wait(k_empty(s), (round - 1) & 1);
        device::mbar_arrive_expect_tx(k_full(s), Tr::kTileBytes);
        device::tma_load_3d(s_k + s * Tr::kTileBytes, &qkv_map, k_full(s), k_col, n0, b);
        device::tma_load_3d(s_k + s * Tr::kTileBytes + Tr::kBoxBytes, &qkv_map, k_full(s), k_col + Tr::kBoxCols, n0, b);
        if (round > 0) device::mbar_wait(v_empty(s), (round - 1) & 1);
        device::mbar_arrive_expect_tx(v_full(s), Tr::kTileBytes);
        device::tma_load_3d(s_v + s * Tr::kTileBytes, &qkv_map, v_full(s), v_col, n0, b);
        device::tma_load_3d(s_v + s * Tr::kTileBytes + Tr::kBoxBytes, &qkv_map, v_full(s), v_col + Tr::kBoxCols, n0, b);
      }
    }
    return;
  }

  // ---------------- consumers ----------------
  device::regs_alloc<Tr::kConsumerRegs>();
  const int half_block = warpgroup - 1;  // which 64 rows of the 128
  const int warp = (threadIdx.x / 32) % 4;
  const int lane = threadIdx.x % 32;
  const int wg_row0 = m0 + half_block * 64;
  const int row0 = wg_row0 + warp * 16 + (lane >> 2);

  OnlineSoftmax softmax;
  float acc_o[kDTiles][4];
#pragma unroll
  for (int i = 0; i < kDTiles; ++i) acc_o[i][0] = acc_o[i][1] = acc_o[i][2] = acc_o[i][3] = 0.f;
  const __nv_bfloat16* mask_rows = nullptr;
  if constexpr (kMask == MaskMode::kAdditive) mask_rows = p.mask + b * p.mask_batch_stride;

  // This warpgroup's 64 rows start 64 * 128 bytes into each Q box.
  const uint32_t q_rows = s_q + half_block * 64 * 128;
  float acc_s[kNTiles][4];
  uint32_t p_frag[kNTiles / 2][4];

  const auto parity = [](int nb) { return uint32_t(nb / Tr::kStages) & 1u; };
  const auto issue_qk = [&](int nb) {
    const int s = nb % Tr::kStages;
    const uint32_t k_tile = s_k + s * Tr::kTileBytes;
    device::mbar_wait(k_full(s), parity(nb));
    device::wgmma_fence();
#pragma unroll
    for (int k = 0; k < Tr::kHeadDim / 16; ++k) {
      // 16 columns = 32 bytes along the swizzled row; columns 64..127 live in the second box.
      const uint32_t off = (k / 4) * Tr::kBoxBytes + (k % 4) * 32;
      device::wgmma_m64n128k16_ss(acc_s, device::smem_desc_sw128(q_rows + off, 16, 1024),
                                  device::smem_desc_sw128(k_tile + off, 16, 1024), k > 0);
    }
    device::wgmma_commit();
  };
  const auto issue_pv = [&](int nb) {
    const int s = nb % Tr::kStages;
    const uint32_t v_tile = s_v + s * Tr::kTileBytes;
    device::mbar_wait(v_full(s), parity(nb));
    device::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Tr::kBlockN / 16; ++kk) {
      // V is [keys][dims], dims contiguous: an MN-major B operand. 16 keys = 2048 bytes down the tile; the
      // second 64 dims sit one box (16 KB) further.
      device::wgmma_m64n128k16_rs_tb(acc_o, p_frag[kk],
                                     device::smem_desc_sw128(v_tile + kk * 16 * 128, Tr::kBoxBytes, 1024), 1);
    }
    device::wgmma_commit();
  };
  const auto logits = [&](int nb) {
    const int n0 = nb * Tr::kBlockN;
    const bool edge =
        (n0 + Tr::kBlockN > seq_len) || (kMask == MaskMode::kCausal && n0 + Tr::kBlockN - 1 > wg_row0);
    scores_to_logits<kSoftcap, kMask, kNTiles>(acc_s, p, mask_rows, row0, n0 + 2 * (lane & 3), seq_len, edge);
  };
  const auto release = [&](uint32_t empty_bar) {
    if (lane == 0) device::mbar_arrive(empty_bar);
  };

  // The two consumer warpgroups take turns issuing their tensor-core work (named barriers 1 and 2), so one's
  // softmax runs while the other's GEMMs occupy the tensor cores. Within a warpgroup, the softmax of tile j
  // overlaps its own P*V of tile j-1.
  constexpr int kSchedThreads = 2 * 128;
  const int my_turn = 1 + half_block, other_turn = 2 - half_block;
  if (half_block == 1) device::named_barrier_arrive(other_turn, kSchedThreads);  // the first half goes first

  device::mbar_wait(q_full, 0);
  device::named_barrier_sync(my_turn, kSchedThreads);
  issue_qk(0);
  device::named_barrier_arrive(other_turn, kSchedThreads);
  device::wgmma_wait<0>();
  device::fence_accumulators(acc_s);
  release(k_empty(0));
  float alpha[2];
  logits(0);
  softmax.exponentiate(acc_s, alpha);  // the output is still zero: nothing to rescale
  pack_p(acc_s, p_frag);

  for (int nb = 1; nb < n_blocks; ++nb) {
    device::named_barrier_sync(my_turn, kSchedThreads);
    issue_qk(nb);
    issue_pv(nb - 1);
    device::named_barrier_arrive(other_turn, kSchedThreads);
    device::wgmma_wait<1>();  // S of tile nb is ready; P*V of tile nb-1 may still run
    device::fence_accumulators(acc_s);
    release(k_empty(nb % Tr::kStages));
    logits(nb);
    softmax.exponentiate(acc_s, alpha);
    device::wgmma_wait<0>();
    device::fence_accumulators(acc_o);
    release(v_empty((nb - 1) % Tr::kStages));
    OnlineSoftmax::rescale(acc_o, alpha);
    pack_p(acc_s, p_frag);
  }

  device::named_barrier_sync(my_turn, kSchedThreads);
  issue_pv(n_blocks - 1);
  device::named_barrier_arrive(other_turn, kSchedThreads);
  device::wgmma_wait<0>();
  device::fence_accumulators(acc_o);
  release(v_empty((n_blocks - 1) % Tr::kStages));

  store_output(acc_o, softmax, p, b, h, row0, lane);
}

}  // namespace gk::gemma3
