// The audio QKV projection on fp16 tensor cores with tf32's rounding (issue 38): the split-K tf32 kernel's grid,
// ring and epilogue (qkv_tf32_splitk_sm90.cuh) over operands a pass made first (f16_rows.cuh: every activation row
// and every weight row scaled by a power of two into fp16's range, tf32-rounded, as fp16 bits, with its exponent).
// fp16 has tf32's 10-bit mantissa, so each product is the one the tf32 mode forms (except for elements more than
// 2^28 below their row's maximum), at twice the tf32 rate; the epilogue divides each sum by its row's and column's
// powers of two before the norm (store_qkv_tile<kUnscale>).
//
// No rounding warps: 9 warps, warpgroups 0 and 1 consume 64 rows each with wgmma.m64n128k16.f16 straight off the TMA
// barriers (a K-block is 64 fp16 = 128 bytes, one swizzle row, four k16 steps of 32 bytes: the tf32 kernel's byte
// layout), warp 8 issues the loads. The kernel launches as the weight pass's programmatic dependent.
#pragma once

#include <cuda_runtime.h>

#include "audio_qkv/params.hpp"
#include "audio_qkv/qkv_epilogue.cuh"
#include "audio_qkv/qkv_ring.cuh"
#include "common/device/sm90_primitives.cuh"
#include "common/device/splitk_reduce.cuh"

namespace gk::audio {

struct QkvF16Traits {
  static constexpr int kBM = 128, kBN = 128, kBK = 64;  // kBK fp16 = 128 bytes: one swizzle row
  static constexpr int kStages = 6;
  static constexpr int kThreads = 128 * 2 + 32;  // two consumer warpgroups and the TMA warp
  static constexpr uint32_t kTileBytes = kBM * kBK * 2;  // 16 KB (kBN == kBM)
  static constexpr uint32_t kStageBytes = 2 * kTileBytes;
  static constexpr int kConsumerWarps = 8;
  static constexpr size_t kSmemBytes = 1024 + size_t(kStages) * kStageBytes + 3 * 8 * kStages;
  static_assert(kBM == QkvTile::kRows && kBN == QkvTile::kCols, "the epilogue's tile");
  static_assert(QkvTile::kParkBytes <= size_t(kStages) * kStageBytes, "partials fit in the ring");
};

// kClusterSplit: K is split over the CTAs of a cluster along z (cluster size = gridDim.z), reduced through DSMEM.
// a_map: the fp16 activations [M, K]; w*_map: the fp16 weights [H*128, K] each (64-column x 128-row boxes).
template <bool kClusterSplit>
__global__ void __launch_bounds__(QkvF16Traits::kThreads, 1)
    audio_qkv_f16_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap wq_map,
                         const __grid_constant__ CUtensorMap wk_map, const __grid_constant__ CUtensorMap wv_map,
                         const QkvGemmParams p) {
  using Tr = QkvF16Traits;
  extern __shared__ unsigned char smem_raw[];
  const QkvRing<Tr> ring(smem_raw);  // the ready barriers are unused: stages are consumed as they land

  const int n_tile = blockIdx.x;  // which * heads + head
  const int which = n_tile / p.heads, head = n_tile % p.heads;
  const int m0 = blockIdx.y * Tr::kBM;
  const int kb0 = blockIdx.z * p.k_blocks;
  const int lane = threadIdx.x % 32;

  if (threadIdx.x == 0) ring.init(1);
  __syncthreads();

  if (threadIdx.x / 128 == 2) {
    // ---------------- TMA warp ----------------
    if (lane == 0) {
      // The operands come from the passes before this kernel (its programmatic prerequisite): wait for them and
      // order their ordinary stores before these TMA reads.
      device::grid_dependency_wait();
      device::fence_proxy_async_global();
      const CUtensorMap* w_map = which == 0 ? &wq_map : (which == 1 ? &wk_map : &wv_map);
      ring.load(&a_map, w_map, kb0, p.k_blocks, m0, head * Tr::kBN);
    }
    if constexpr (kClusterSplit) {
      device::splitk::partials_parked();
      device::splitk::partials_read();
    }
    return;
  }

  // ---------------- consumers ----------------
  const int wg = threadIdx.x / 128;
  float acc[16][4];
#pragma unroll
  for (int j = 0; j < 16; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  for (int i = 0; i < p.k_blocks; ++i) {
    const int s = ring.pipe.stage(i);
    device::mbar_wait(ring.pipe.full(s), ring.pipe.parity(i));
    device::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Tr::kBK / 16; ++kk) {
      // 16 fp16 = 32 bytes along the swizzled row; this warpgroup's 64 rows start 64 * 128 bytes in.
      const uint32_t a = ring.stage(s) + wg * 64 * 128 + kk * 32, b = ring.stage(s) + Tr::kTileBytes + kk * 32;
      device::wgmma_m64n128k16_f16_ss(acc, device::smem_desc_sw128(a, 16, 1024), device::smem_desc_sw128(b, 16, 1024),
                                      1);
    }
    device::wgmma_commit();
    device::wgmma_wait<1>();
    device::fence_accumulators(acc);
    if (i > 0 && lane == 0) ring.pipe.consumer_release(i - 1);
  }
  device::wgmma_wait<0>();
  device::fence_accumulators(acc);
  store_qkv_tile<kClusterSplit, /*kUnscale=*/true>(acc, p, which, head, m0, wg, ring.base);
}

}  // namespace gk::audio
