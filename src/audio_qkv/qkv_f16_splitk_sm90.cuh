// The audio QKV projection on fp16 tensor cores (issue 38): the split-K tf32 kernel's grid and epilogue
// (qkv_tf32_splitk_sm90.cuh) over operands a pass made first (f16_rows.cuh: every activation row and every weight row
// scaled by a power of two into fp16's range, with its exponent).
//   kTerms = 1, the tf32 mode: each element tf32-rounded as fp16 bits. fp16 has tf32's 10-bit mantissa, so each
//     product is the one the tf32 mode forms (except for elements more than 2^28 below their row's maximum), at
//     twice the tf32 rate.
//   kTerms = 2, the exact mode: each element as hi + lo * 2^-11 (22 of its 24 bits); three products, hi*hi summed
//     per K-block and added into an fp32 accumulator with rounding to nearest, hi*lo + lo*hi accumulated apart and
//     joined times 2^-11 at the end (Ootomo & Yokota's form: the small terms kept apart from the big ones' rounding).
// The epilogue divides each sum by its row's and column's powers of two before the norm (store_qkv_tile<kUnscale>).
//
// No rounding warps: warpgroups 0 and 1 consume 64 rows each with wgmma.m64n128k16.f16 straight off the TMA barriers
// (a K-block is 64 fp16 = 128 bytes, one swizzle row, four k16 steps of 32 bytes: the tf32 kernel's byte layout),
// warp 8 issues the loads (9 warps; with two terms a whole producer warpgroup, 12). One term runs here only with a K
// split: without one the ping-pong kernel (qkv_f16_pingpong_sm90.cuh) is faster in every form measured (perf log
// v57). The operand buffers hold the hi rows, then (two terms) the lo rows: activations [terms * M][K], weights
// [terms * 3 * H * 128][K] (q's rows, k's, v's). The kernel launches as the last pass's programmatic dependent.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "audio_qkv/params.hpp"
#include "audio_qkv/qkv_epilogue.cuh"
#include "common/device/pipeline.cuh"
#include "common/device/sm90_gemm_primitives.cuh"
#include "common/device/sm90_primitives.cuh"
#include "common/device/splitk_reduce.cuh"

namespace gk::audio {

template <int kTerms_>
struct QkvF16Traits {
  static constexpr int kTerms = kTerms_;
  static constexpr int kBM = 128, kBN = 128, kBK = 64;  // a head's tile; kBK fp16 = 128 bytes: one swizzle row
  // Two consumer warpgroups and the TMA warp; two terms: a whole producer warpgroup, so that setmaxnreg can give the
  // consumers the registers of three accumulators (kConsumerRegs).
  static constexpr int kThreads = kTerms == 1 ? 128 * 2 + 32 : 128 * 3;
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static constexpr uint32_t kTileBytes = kBM * kBK * 2;  // 16 KB (kBN == kBM)
  static constexpr uint32_t kStageBytes = 2 * kTerms * kTileBytes;  // A hi, W hi (, A lo, W lo)
  static constexpr int kStages = kTerms == 2 ? 3 : 6;
  static constexpr int kConsumerWarps = 8;
  static constexpr size_t kSmemBytes = 1024 + size_t(kStages) * kStageBytes + 2 * 8 * kStages;
  static_assert(kTerms == 1 || kTerms == 2, "one or two fp16 terms");
  static_assert(kBM == QkvTile::kRows && kBN == QkvTile::kCols, "the epilogue's tile");
  static_assert(QkvTile::kParkBytes <= size_t(kStages) * kStageBytes, "partials fit in the ring");
  static_assert(kSmemBytes <= 227 * 1024, "the opt-in shared-memory limit (the 1024 covers the base's alignment)");
};

// kClusterSplit: K is split over the CTAs of a cluster along z (cluster size = gridDim.z), reduced through DSMEM.
// a_map: the fp16 activations [kTerms * M, K]; w_map: the weights [kTerms * 3 * H * 128, K] (64 x 128 boxes).
template <int kTerms, bool kClusterSplit>
__global__ void __launch_bounds__(QkvF16Traits<kTerms>::kThreads, 1)
    audio_qkv_f16_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap w_map,
                         const QkvGemmParams p) {
  using Tr = QkvF16Traits<kTerms>;
  static_assert(kTerms == 2 || kClusterSplit, "one term without a K split runs on the ping-pong kernel");
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = device::smem_base_1024(smem_raw), bar = base + Tr::kStages * Tr::kStageBytes;
  const device::Pipeline<Tr::kStages> pipe{bar, bar + 8u * Tr::kStages};
  const auto stage = [&](int s) { return base + s * Tr::kStageBytes; };
  // Tiles of a stage: A hi, W hi, then A lo, W lo.
  const auto tile = [&](int s, int t) { return stage(s) + t * Tr::kTileBytes; };

  const int n_tile = blockIdx.x;  // which * heads + head
  const int which = n_tile / p.heads, head = n_tile % p.heads;
  const int m0 = blockIdx.y * Tr::kBM;
  const int kb0 = blockIdx.z * p.k_blocks;
  const int lane = threadIdx.x % 32;
  const int w_rows = 3 * p.heads * Tr::kBN, w_row0 = which * p.heads * Tr::kBN + head * Tr::kBN;

  if (threadIdx.x == 0) {
    for (int s = 0; s < Tr::kStages; ++s) {
      device::mbar_init(pipe.full(s), 1);
      device::mbar_init(pipe.empty(s), Tr::kConsumerWarps);
    }
    device::mbar_fence_init();
  }
  __syncthreads();

  if (threadIdx.x / 128 == 2) {
    // ---------------- TMA warp (of the producer warpgroup with two terms) ----------------
    if constexpr (kTerms == 2) device::regs_dealloc<Tr::kProducerRegs>();
    if (threadIdx.x == 256) {
      // The operands come from the passes before this kernel (its programmatic prerequisite): wait for them and
      // order their ordinary stores before these TMA reads.
      device::grid_dependency_wait();
      device::fence_proxy_async_global();
      device::tma_prefetch_descriptor(&a_map);
      device::tma_prefetch_descriptor(&w_map);
      for (int i = 0; i < p.k_blocks; ++i) {
        const int s = pipe.stage(i), col = (kb0 + i) * Tr::kBK;
        const uint32_t full = pipe.producer_acquire(i, Tr::kStageBytes);
        device::tma_load_2d(tile(s, 0), &a_map, full, col, m0);
        device::tma_load_2d(tile(s, 1), &w_map, full, col, w_row0);
        if constexpr (kTerms == 2) {
          // The lo rows follow the hi rows (the last row tile's rows past M read lo rows: never stored).
          device::tma_load_2d(tile(s, 2), &a_map, full, col, p.m + m0);
          device::tma_load_2d(tile(s, 3), &w_map, full, col, w_rows + w_row0);
        }
      }
    }
    if constexpr (kClusterSplit) {
      device::splitk::partials_parked();
      device::splitk::partials_read();
    }
    return;
  }

  // ---------------- consumers ----------------
  if constexpr (kTerms == 2) device::regs_alloc<Tr::kConsumerRegs>();
  const int wg = threadIdx.x / 128;
  float acc[16][4];
#pragma unroll
  for (int j = 0; j < 16; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  // 16 fp16 = 32 bytes along the swizzled row; this warpgroup's 64 rows start 64 * 128 bytes in.
  const auto a = [&](int s, int t, int kk) {
    return device::smem_desc_sw128(tile(s, t) + wg * 64 * 128 + kk * 32, 16, 1024);
  };
  const auto b = [&](int s, int t, int kk) { return device::smem_desc_sw128(tile(s, t) + kk * 32, 16, 1024); };
  if constexpr (kTerms == 2) {
    // Each K-block's hi products summed apart in `block` and added into acc in fp32, rounding to nearest, so that
    // the tensor cores' own accumulation (which does not round to nearest) spans one K-block's products, not K: over
    // K its error exceeded fp32 SGEMM's (docs/perf-log.md v35). The cross products, 2^11 smaller, accumulate
    // over K in `small` and join at the end. The block's sum is needed before the next block's products: one wait
    // per K-block, the other warpgroup's products filling it.
    float block[16][4], small[16][4];
#pragma unroll
    for (int j = 0; j < 16; ++j) small[j][0] = small[j][1] = small[j][2] = small[j][3] = 0.f;
    for (int i = 0; i < p.k_blocks; ++i) {
      const int s = pipe.stage(i);
      device::mbar_wait(pipe.full(s), pipe.parity(i));
      device::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Tr::kBK / 16; ++kk) {
        device::wgmma_m64n128k16_f16_ss(block, a(s, 0, kk), b(s, 1, kk), kk);  // hi * hi, fresh at kk = 0
        device::wgmma_m64n128k16_f16_ss(small, a(s, 0, kk), b(s, 3, kk), 1);   // hi * lo
        device::wgmma_m64n128k16_f16_ss(small, a(s, 2, kk), b(s, 1, kk), 1);   // lo * hi
      }
      device::wgmma_commit();
      device::wgmma_wait<0>();
      device::fence_accumulators(block);
      device::fence_accumulators(small);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] += block[j][e];
      }
      if (lane == 0) pipe.consumer_release(i);
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] = fmaf(small[j][e], 1.f / 2048.f, acc[j][e]);
    }
  } else {
    // One term: the products straight into the accumulators, one K-block's group in flight, its stage freed once
    // the next group is issued and the earlier one retired.
    for (int i = 0; i < p.k_blocks; ++i) {
      const int s = pipe.stage(i);
      device::mbar_wait(pipe.full(s), pipe.parity(i));
      device::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Tr::kBK / 16; ++kk) device::wgmma_m64n128k16_f16_ss(acc, a(s, 0, kk), b(s, 1, kk), 1);
      device::wgmma_commit();
      device::wgmma_wait<1>();
      device::fence_accumulators(acc);
      if (i > 0 && lane == 0) pipe.consumer_release(i - 1);
    }
    device::wgmma_wait<0>();
    device::fence_accumulators(acc);
  }
  // The epilogue reads the passes' exponents with ordinary loads: the grid dependency is this thread's own to wait
  // for (long met by now: the stages it consumed came after the TMA warp's wait).
  device::grid_dependency_wait();
  // The ring's shared memory is free for the split-K epilogue's partials once every stage is consumed.
  store_qkv_tile<kClusterSplit, /*kUnscale=*/true>(acc, p, which, head, m0, wg, base);
}

}  // namespace gk::audio
