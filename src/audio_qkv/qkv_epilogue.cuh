// The audio QKV kernels' common epilogue (tf32 and 3xTF32): one 128-row x 128-column tile, exactly one head of
// q, k or v, held by two consumer warpgroups in the wgmma accumulator layout; q and k get the per-head RMSNorm
// (weight offset 0), v is stored as is. With a K split over a z-cluster, each CTA parks its partial tile in shared
// memory and reduces a share of the rows over the cluster through DSMEM before normalizing and storing.
#pragma once

#include <cuda_runtime.h>

#include "audio_qkv/params.hpp"
#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"

namespace gk::audio {

// The audio norm's scale for a head whose 128 values square-sum to ss: 1 / sqrt(mean + eps), as the correctly
// rounded reciprocal of the correctly rounded square root. Every audio epilogue (this one and the persistent
// kernel's, qkv_head_epilogue.cuh) multiplies by it: within 1.5 ulp of the definition's division, far inside both
// modes' error budgets, and a division per element was most of the epilogues' instructions.
__device__ __forceinline__ float head_inv_rms(float ss, float eps) {
  return __frcp_rn(__fsqrt_rn(ss * (1.f / 128) + eps));
}

struct QkvTile {
  static constexpr int kRows = 128, kCols = 128;
  static constexpr int kConsumerWarps = 8;
  static constexpr int kPartialStride = kCols + 4;  // floats per parked row: the pad spreads rows over banks
  static constexpr size_t kParkBytes = size_t(kRows) * kPartialStride * 4;
};

// Called by the 256 consumer threads (warpgroups 0 and 1, `wg`) once their accumulators are final. `park`: shared
// memory the kernel no longer needs (kParkBytes), used only with kClusterSplit. Every other thread of a split
// kernel must meet the two cluster barriers inside (device::cluster_sync() twice).
template <bool kClusterSplit>
__device__ __forceinline__ void store_qkv_tile(const float (&acc)[16][4], const QkvGemmParams& p, int which, int head,
                                               int m0, int wg, uint32_t park) {
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int n_out = p.heads * QkvTile::kCols;
  const float* norm_w = which == 0 ? p.q_norm : p.k_norm;
  float* out = which == 0 ? p.q : (which == 1 ? p.k : p.v);
  out += head * QkvTile::kCols;
  const int g = lane >> 2, t4 = lane & 3;

  if constexpr (!kClusterSplit) {
    // Thread holds rows r and r+8 of its warp's 16, columns 8j + 2t4 (+1): a row's 128 columns are spread over
    // the 4 threads of a quad.
    const int row_a = m0 + wg * 64 + warp * 16 + g;
    float inv[2] = {1.f, 1.f};
    if (which < 2) {
      float ss[2] = {0.f, 0.f};
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        ss[0] += acc[j][0] * acc[j][0] + acc[j][1] * acc[j][1];
        ss[1] += acc[j][2] * acc[j][2] + acc[j][3] * acc[j][3];
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        ss[h] += __shfl_xor_sync(0xffffffffu, ss[h], 1);
        ss[h] += __shfl_xor_sync(0xffffffffu, ss[h], 2);
        inv[h] = head_inv_rms(ss[h], p.eps);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row_a + 8 * h;
      if (row >= p.m) continue;
      float* o = out + int64_t(row) * n_out + 2 * t4;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        float2 v = make_float2(acc[j][2 * h], acc[j][2 * h + 1]);
        if (which < 2) {
          const float2 wv = *reinterpret_cast<const float2*>(norm_w + 8 * j + 2 * t4);
          v = make_float2(v.x * inv[h] * wv.x, v.y * inv[h] * wv.y);
        }
        *reinterpret_cast<float2*>(o + 8 * j) = v;
      }
    }
  } else {
    // Park the partial tile (row-major, padded rows) over the ring, which both consumer warpgroups are done with
    // once they pass the named barrier.
    device::named_barrier_sync(1, 256);
    const uint32_t parked = park;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wg * 64 + warp * 16 + g + 8 * h;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        device::st_shared_v2_f32(parked + (r * QkvTile::kPartialStride + 8 * j + 2 * t4) * 4, acc[j][2 * h],
                                 acc[j][2 * h + 1]);
      }
    }
    device::cluster_sync();
    // This CTA reduces rows [rank * rows_per, (rank + 1) * rows_per) over the cluster: one warp per row, four
    // columns per lane.
    const uint32_t split = gridDim.z, rank = device::cluster_ctarank();
    const int rows_per = QkvTile::kRows / static_cast<int>(split);
    const int cw = threadIdx.x / 32;  // consumer warp 0..7
    const float4 wv4 = which < 2 ? reinterpret_cast<const float4*>(norm_w)[lane] : make_float4(1.f, 1.f, 1.f, 1.f);
    for (int r = cw; r < rows_per; r += QkvTile::kConsumerWarps) {
      const int row_in_tile = static_cast<int>(rank) * rows_per + r;
      const uint32_t local = parked + (row_in_tile * QkvTile::kPartialStride + 4 * lane) * 4;
      float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
      for (uint32_t q = 0; q < split; ++q) {
        const float4 x = device::ld_cluster_f32x4(device::cluster_map(local, q));
        sum.x += x.x;
        sum.y += x.y;
        sum.z += x.z;
        sum.w += x.w;
      }
      if (which < 2) {
        float ss = sum.x * sum.x + sum.y * sum.y + sum.z * sum.z + sum.w * sum.w;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
        const float inv = head_inv_rms(ss, p.eps);
        sum = make_float4(sum.x * inv * wv4.x, sum.y * inv * wv4.y, sum.z * inv * wv4.z, sum.w * inv * wv4.w);
      }
      const int row = m0 + row_in_tile;
      if (row < p.m) reinterpret_cast<float4*>(out + int64_t(row) * n_out)[lane] = sum;
    }
    device::cluster_sync();
  }
}

}  // namespace gk::audio
