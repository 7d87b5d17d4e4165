// The split-K reduction of the cluster-split kernels (the projection GEMM, splitk_proj_gemm_sm90.cuh, and the audio
// QKV kernels, audio_qkv/qkv_epilogue.cuh): K is split over the CTAs of a cluster, each CTA parks its fp32 partial
// tile in its own shared memory (padded rows, over the ring it no longer needs), the cluster syncs, and every CTA
// sums a share of the tile's rows over the cluster's ranks through distributed shared memory, then normalizes and
// stores them. Which rows a CTA and warp take, and what happens to a summed row, stay with each kernel.
//
// The sums load a whole batch of rows from every rank before adding any: summed one row at a time, each row waited
// a DSMEM round trip (docs/perf-log.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"

namespace gk::device::splitk {

// Parks one thread's share of a warp's 16 rows in the wgmma accumulator layout (16 groups of 8 columns: rows
// row0 and row0 + 8, columns col0 + 8 j + 2 t4 (+1)) as fp32 rows of kStride floats from `parked`.
template <int kStride>
__device__ __forceinline__ void park_rows(uint32_t parked, const float (&acc)[16][4], int row0, int col0, int t4) {
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = row0 + 8 * hr;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      st_shared_v2_f32(parked + (r * kStride + col0 + 8 * j + 2 * t4) * 4, acc[j][2 * hr], acc[j][2 * hr + 1]);
    }
  }
}

// The cluster barriers of the protocol, which every thread of every CTA of the cluster meets, whether or not it
// parks or sums: after parking (every CTA's partials are written and visible cluster-wide), and after summing (no
// CTA's shared memory is reused or released while another may still read its partials).
__device__ __forceinline__ void partials_parked() { cluster_sync(); }
__device__ __forceinline__ void partials_read() { cluster_sync(); }

// The 16 bytes at shared address `local` in cluster rank `rank`'s copy (kCluster), or in this CTA's own (a kernel
// launched without a split, where the only rank is this CTA).
template <bool kCluster>
__device__ __forceinline__ float4 load_partial(uint32_t local, uint32_t rank) {
  if constexpr (kCluster) {
    return ld_cluster_f32x4(cluster_map(local, rank));
  } else {
    const uint4 raw = ld_shared_v4(local);
    return make_float4(__uint_as_float(raw.x), __uint_as_float(raw.y), __uint_as_float(raw.z),
                       __uint_as_float(raw.w));
  }
}

__device__ __forceinline__ void add_f32x4(float4& sum, const float4& x) {
  sum.x += x.x;
  sum.y += x.y;
  sum.z += x.z;
  sum.w += x.w;
}

// A split known at compile time, in two steps so that a caller issues every remote load of a batch of chunks
// before it sums any: load_ranks fetches one chunk (16 bytes at `local` in each CTA) from ranks 0 .. kRanks - 1,
// sum_ranks adds them in rank order.
template <int kRanks>
__device__ __forceinline__ void load_ranks(float4 (&part)[kRanks], uint32_t local) {
#pragma unroll
  for (int q = 0; q < kRanks; ++q) part[q] = ld_cluster_f32x4(cluster_map(local, q));
}
template <int kRanks>
__device__ __forceinline__ float4 sum_ranks(const float4 (&part)[kRanks]) {
  float4 sum = part[0];
#pragma unroll
  for (int q = 1; q < kRanks; ++q) add_f32x4(sum, part[q]);
  return sum;
}

}  // namespace gk::device::splitk
