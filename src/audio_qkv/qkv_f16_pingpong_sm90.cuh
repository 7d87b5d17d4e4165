// The one-term fp16 audio QKV GEMM with ping-pong consumers (issue 38). In the cooperative kernel
// (qkv_f16_splitk_sm90.cuh) both consumer warpgroups share one output tile, so the tensor cores idle while they
// unscale, normalize and store it (about 40% of a tile's time, docs/perf-log.md v52). Here one persistent CTA an SM
// walks the output tiles in the tiled grid's order (heads fastest, then row tiles) and its two consumer warpgroups
// take alternate tiles of that walk, each a whole tile in its own accumulators: one warpgroup's epilogue runs while
// the other's products keep the tensor cores busy.
//
// The ring is the cooperative kernel's (a K-block of 64 fp16 a stage, one TMA thread, a running count across tiles);
// a stage belongs to the warpgroup whose tile it holds and only that warpgroup's four warps free it. The warpgroups
// take turns at the mainloop (named barriers kOrderBarrier + wg): a stage's full barrier tells phases apart only by
// parity, so a warpgroup may wait on a stage only once every earlier fill of it has been waited for; without the
// turns the second warpgroup's first wait would pass on the first tile's data.
//   kHeads = 1: a warpgroup's tile is 128 rows x one head, two m64n128k16 products a k16 step;
//   kHeads = 2: 64 rows x two neighbouring heads, one m64n256k16 product (fewer instructions and shared-memory bytes
//     a product; a quarter more L2 bytes a product).
// The epilogue's per-row and per-column inputs are loaded into registers before a tile's products and staged into
// the warpgroup's own shared memory after them, so their latency hides under the mainloop.
// kCluster = 2: clusters of two CTAs (along z) walk units of two neighbouring row tiles and one tile of heads; each
// CTA loads its own activation tile and half of the shared weight rows, multicast into both, so a CTA reads a
// quarter (one head) or 40% (two heads) fewer L2 bytes a K-block. A stage is then freed by both CTAs' warpgroups.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "audio_qkv/params.hpp"
#include "audio_qkv/qkv_epilogue.cuh"
#include "common/device/pipeline.cuh"
#include "common/device/sm90_gemm_primitives.cuh"
#include "common/device/sm90_primitives.cuh"

namespace gk::audio {

template <int kHeads_, int kCluster_ = 1>
struct QkvF16PingpongTraits {
  static constexpr int kHeads = kHeads_, kCluster = kCluster_;
  static constexpr int kBM = kHeads == 1 ? 128 : 64;  // a warpgroup tile's rows
  static constexpr int kBN = 128, kBK = 64;            // a head; kBK fp16 = 128 bytes, one swizzle row
  static constexpr int kThreads = 3 * 128;             // two consumer warpgroups, then the producer warpgroup
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // 128 accumulators a consumer thread
  static constexpr uint32_t kATileBytes = kBM * kBK * 2, kWTileBytes = kBN * kBK * 2;
  static constexpr uint32_t kStageBytes = kATileBytes + kHeads * kWTileBytes;  // 32 or 40 KB
  static constexpr int kStages = kHeads == 1 ? 6 : 5;
  using Staged = StagedArea<kBM, kHeads * kBN, kBN>;  // a warpgroup's: row and column exponents, norm weights
  static constexpr size_t kSmemBytes =
      1024 + size_t(kStages) * kStageBytes + 2 * 8 * kStages + 2 * 4 * size_t(Staged::kWords);
  static constexpr int kWBoxRows = 64;  // the weights' TMA box: kCluster = 2 splits a tile's rows between the CTAs
  static constexpr int kOrderBarrier = 5;  // + wg: warpgroup wg's turn at the mainloop (3 + wg: its epilogue's)
  static_assert(kHeads == 1 || kHeads == 2, "one or two heads a warpgroup tile");
  static_assert(kCluster == 1 || kCluster == 2, "clusters of one or two CTAs");
  static_assert(kATileBytes % 1024 == 0 && kStageBytes % 1024 == 0, "128-byte swizzle atoms stay aligned");
  static_assert(kBN == QkvTile::kCols, "the epilogue's head");
  static_assert(kSmemBytes <= 227 * 1024, "the opt-in shared-memory limit (the 1024 covers the base's alignment)");
};

// a_map: the fp16 activations [M, K] in 64-column x kBM-row boxes; w_map: the weights [3 * H * 128, K] in 64 x 64
// boxes (q's rows, k's, v's). p.k_blocks: K / 64 (no K split). Grid (clusters or CTAs, 1, kCluster), clusters along
// z, no more than are resident at once; launched as the operand pass's programmatic dependent.
template <int kHeads, int kCluster>
__global__ void __launch_bounds__(QkvF16PingpongTraits<kHeads, kCluster>::kThreads, 1)
    audio_qkv_f16_pingpong_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap w_map,
                                  const QkvGemmParams p) {
  using Tr = QkvF16PingpongTraits<kHeads, kCluster>;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = device::smem_base_1024(smem_raw), bar = base + Tr::kStages * Tr::kStageBytes;
  const device::Pipeline<Tr::kStages> pipe{bar, bar + 8u * Tr::kStages};
  const auto stage = [&](int s) { return base + s * Tr::kStageBytes; };

  // Units: kCluster row tiles x one tile of heads, heads fastest; cluster blockIdx.x takes every gridDim.x-th, its
  // CTA of rank blockIdx.z the unit's rank-th row tile (past M at the end: read as zeros, never stored).
  const int ctas_per = p.heads / kHeads, n_per = 3 * ctas_per, rank = kCluster == 2 ? int(blockIdx.z) : 0;
  const int m_tiles = (p.m + Tr::kBM - 1) / Tr::kBM, units = n_per * ((m_tiles + kCluster - 1) / kCluster);
  const int my_tiles = units > int(blockIdx.x) ? (units - 1 - int(blockIdx.x)) / int(gridDim.x) + 1 : 0;
  struct Coords {
    int which, head, m0, w_row0;
  };
  const auto coords = [&](int j) {  // this CTA's j-th tile
    const int u = int(blockIdx.x) + j * int(gridDim.x), n_tile = u % n_per;
    const int which = n_tile / ctas_per, head = n_tile % ctas_per * kHeads;
    return Coords{which, head, (u / n_per * kCluster + rank) * Tr::kBM, (which * p.heads + head) * Tr::kBN};
  };

  if (threadIdx.x == 0) {
    pipe.init(4 * kCluster);  // freed by the four warps of the warpgroup whose tile it holds, in each CTA
    device::mbar_fence_init();
  }
  if constexpr (kCluster == 2) {
    device::cluster_sync();  // the peer's barriers exist before any multicast or remote arrival reaches them
  } else {
    __syncthreads();
  }

  if (threadIdx.x >= 256) {
    // ---------------- producer warpgroup: one thread issues the loads ----------------
    device::regs_dealloc<Tr::kProducerRegs>();
    if (threadIdx.x == 256) {
      // The operands come from the pass before this kernel: wait for it and order its stores before the TMA reads.
      device::grid_dependency_wait();
      device::fence_proxy_async_global();
      device::tma_prefetch_descriptor(&a_map);
      device::tma_prefetch_descriptor(&w_map);
      int count = 0;
      for (int j = 0; j < my_tiles; ++j) {
        const Coords c = coords(j);
        for (int i = 0; i < p.k_blocks; ++i, ++count) {
          const int s = pipe.stage(count), col = i * Tr::kBK;
          const uint32_t full = pipe.producer_acquire(count, Tr::kStageBytes);
          device::tma_load_2d(stage(s), &a_map, full, col, c.m0);
          // The tile's kHeads * 128 weight rows lie one after another in the stage; with two CTAs each loads half.
          constexpr int kBoxes = kHeads * Tr::kBN / Tr::kWBoxRows / kCluster;
#pragma unroll
          for (int b = 0; b < kBoxes; ++b) {
            const int row = (rank * kBoxes + b) * Tr::kWBoxRows;
            const uint32_t dst = stage(s) + Tr::kATileBytes + row * 128;
            if constexpr (kCluster == 2) {
              device::tma_load_2d_multicast(dst, &w_map, full, col, c.w_row0 + row, 0x3);
            } else {
              device::tma_load_2d(dst, &w_map, full, col, c.w_row0 + row);
            }
          }
        }
      }
    }
  } else {
    // ---------------- consumer warpgroups: tiles j = wg, wg + 2, ... of the walk ----------------
    device::regs_alloc<Tr::kConsumerRegs>();
    const int wg = threadIdx.x / 128, ct = threadIdx.x % 128, lane = threadIdx.x % 32;
    const int barrier = 3 + wg;  // this warpgroup's named barrier (128 threads)
    // This warpgroup's staged epilogue inputs, past the barriers (a generic pointer from the shared address).
    const typename Tr::Staged st(smem_raw, bar + 16u * Tr::kStages + 4u * wg * Tr::Staged::kWords);
    const int n_out = p.heads * Tr::kBN;
    device::grid_dependency_wait();  // the exponents come from the pass

    // A stage is freed in each CTA that holds it (kCluster = 2: in both, whose producers multicast into both).
    const uint32_t empty0_r0 = kCluster == 2 ? device::cluster_map(pipe.empty(0), 0) : 0;
    const uint32_t empty0_r1 = kCluster == 2 ? device::cluster_map(pipe.empty(0), 1) : 0;
    const auto release = [&](int count) {
      if (lane != 0) return;
      if constexpr (kCluster == 2) {
        device::Pipeline<Tr::kStages>::consumer_release_cluster(count, empty0_r0, empty0_r1);
      } else {
        pipe.consumer_release(count);
      }
    };

    float acc[32][4];  // kHeads = 1: rows 0-63 in acc[0..15], rows 64-127 in acc[16..31]; 2: one m64n256 tile
    using Half = float(&)[16][4];
    const auto half = [&](int h) -> Half { return reinterpret_cast<Half>(acc[16 * h]); };
    for (int j = wg; j < my_tiles; j += 2) {
      const Coords c = coords(j);
      const int ra = ct < Tr::kBM && c.m0 + ct < p.m ? p.a_exps[c.m0 + ct] : 0;
      int rw[kHeads];
#pragma unroll
      for (int h = 0; h < kHeads; ++h) rw[h] = p.w_exps[c.which * n_out + (c.head + h) * Tr::kBN + ct];
      const float rn = c.which < 2 ? (c.which == 0 ? p.q_norm : p.k_norm)[ct] : 0.f;

#pragma unroll
      for (int r = 0; r < 32; ++r) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = 0.f;
      // This warpgroup's turn: the other has waited for every stage of the previous tile.
      if (j > 0) device::named_barrier_sync(Tr::kOrderBarrier + wg, 256);
      // One K-block's group in flight; its stage freed once the next group is issued and the earlier one retired.
      int count = j * p.k_blocks;
      for (int i = 0; i < p.k_blocks; ++i, ++count) {
        const uint32_t a_tile = stage(pipe.stage(count)), w_tile = a_tile + Tr::kATileBytes;
        pipe.consumer_wait(count);
        device::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < Tr::kBK / 16; ++kk) {  // 16 fp16 = 32 bytes along the swizzled row
          const uint64_t db = device::smem_desc_sw128(w_tile + kk * 32, 16, 1024);
          if constexpr (kHeads == 1) {
            device::wgmma_m64n128k16_f16_ss(half(0), device::smem_desc_sw128(a_tile + kk * 32, 16, 1024), db, 1);
            device::wgmma_m64n128k16_f16_ss(half(1), device::smem_desc_sw128(a_tile + 64 * 128 + kk * 32, 16, 1024),
                                            db, 1);
          } else {
            device::wgmma_m64n256k16_f16_ss(acc, device::smem_desc_sw128(a_tile + kk * 32, 16, 1024), db, 1);
          }
        }
        device::wgmma_commit();
        device::wgmma_wait<1>();
        device::fence_accumulators(acc);
        if (i > 0) release(count - 1);
      }
      // The next tile's turn (the other warpgroup's), once this one's waits are all past.
      if (j + 1 < my_tiles) device::named_barrier_arrive(Tr::kOrderBarrier + 1 - wg, 256);
      device::wgmma_wait<0>();
      device::fence_accumulators(acc);
      release(count - 1);

      // Stage the inputs once every thread of the warpgroup has finished the previous tile's epilogue.
      device::named_barrier_sync(barrier, 128);
      if (ct < Tr::kBM) st.a[ct] = ra;
#pragma unroll
      for (int h = 0; h < kHeads; ++h) st.w[h * Tr::kBN + ct] = rw[h];
      st.n[ct] = rn;
      device::named_barrier_sync(barrier, 128);
      if constexpr (kHeads == 1) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // the warpgroup's rows 64 h .. 64 h + 63 of the tile
          store_qkv_tile<false, /*kUnscale=*/true, /*kStreaming=*/true>(half(h), p, c.which, c.head, c.m0, h, base,
                                                                        false, st.inputs(0, Tr::kBN, c.which < 2));
        }
      } else {
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // head c.head + h
          store_qkv_tile<false, /*kUnscale=*/true, /*kStreaming=*/true>(
              half(h), p, c.which, c.head + h, c.m0, 0, base, false, st.inputs(h, Tr::kBN, c.which < 2));
        }
      }
    }
  }
  if constexpr (kCluster == 2) device::cluster_sync();  // no CTA leaves while its peer may still reach into it
}

}  // namespace gk::audio
