// The few-row projection: out = A * W^T for M <= 16 rows (a decode step's tokens), where the step is the weight
// stream and nothing else. A CTA owns one unit of output columns (a head, or 128 columns of the O projection) and a
// share of K; a cluster of CTAs along z splits K and reduces the partial tiles through distributed shared memory
// (device::splitk), then runs the same head-row epilogue as the 128-row split-K kernel (head_row.cuh).
//
// Mainloop: each warp owns kGroups groups of 8 weight rows; lanes 4r..4r+3 take 64 contiguous bytes of row r per
// 32-column chunk, a set of 8 such 16-byte pieces per lane. The sets stream through a per-thread cp.async ring of
// kStages sets (each thread reads back only what it copied, so no barrier), so the next sets' bytes stay in flight
// while one is multiplied; the weights are issued before the wait on the previous kernel, since they never depend
// on it. A chunk feeds two m16n8k16 MMAs with K permuted: a lane's 8 consecutive values serve the k slots it owns in
// both MMAs, and the activation fragments are read with the same permutation (a dot product does not depend on the
// order of its terms' k). The activations (<= 16 rows) are small and every warp reads the same ones: they stay in L1.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "common/device/kv_cache.cuh"
#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"
#include "common/device/splitk_reduce.cuh"
#include "projection/head_row.cuh"
#include "projection/params.hpp"

namespace gk::gemma3 {

template <int kUnit_>
struct SkinnyProjTraits {
  static constexpr int kUnit = kUnit_;  // output columns of a CTA: 128 or 256
  static constexpr int kWarps = 8, kThreads = 32 * kWarps;
  static constexpr int kRows = 16;                        // one m16 tile of A
  static constexpr int kChunk = 32;                       // K per load of a lane quad
  static constexpr int kGroups = kUnit / (8 * kWarps);    // 8-row weight groups per warp: 2 or 4
  static constexpr int kChunksPerSet = 8 / kGroups;       // 8 weight pieces per lane and set
  static constexpr int kPieces = kChunksPerSet * kGroups;
  static constexpr int kStages = 3;                       // sets in the ring: two in flight while one is used
  static constexpr int kSetBytes = kPieces * kThreads * 16;
  static constexpr int kSmemBytes = kStages * kSetBytes;  // the parked partial tile reuses it after the mainloop
  static constexpr int kCols = kUnit / 32;                // epilogue columns per lane
  static constexpr int kPartialStride = kUnit + 4;        // floats per parked row: the pad spreads rows over banks
  static constexpr int kRowsPerWarp = kRows / kWarps;     // epilogue rows of a warp without a split
  static_assert(kUnit == 128 || kUnit == 256, "a unit of 128 or 256 columns");
  static_assert(kRows * kPartialStride * 4 <= kSmemBytes, "the parked tile fits the drained ring");
};

namespace skinny_detail {

// 16 weight bytes into the ring, past L1, with a 256-byte L2 fetch (a quad's next chunks follow); zeros where the
// chunk is past the CTA's share of K.
__device__ __forceinline__ void copy_stream(uint32_t dst, const __nv_bfloat16* src, bool live) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(live ? 16 : 0)
               : "memory");
}

// A's 16 bytes: a coherent load (L1-cached: every warp reads the same rows), and volatile so that it stays after the
// wait on the previous kernel (the compiler hoists __ldg's invariant loads above it).
__device__ __forceinline__ uint4 load_a(const __nv_bfloat16* p) {
  uint4 r;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p)
               : "memory");
  return r;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

}  // namespace skinny_detail

// kCluster: K is split over the CTAs of a cluster along z (cluster size = gridDim.z).
template <int kUnit, bool kCluster>
__global__ void __launch_bounds__(SkinnyProjTraits<kUnit>::kThreads, 2) skinny_proj_kernel(const SkinnyProjParams p) {
  using Tr = SkinnyProjTraits<kUnit>;
  using bf16 = __nv_bfloat16;
  using namespace skinny_detail;
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t ring = device::smem_addr(smem) + threadIdx.x * 16;  // this thread's slot of piece 0, stage 0
  float* const parked = reinterpret_cast<float*>(smem);

  // Selects, not p.x[seg]: a dynamic index into the parameter block would copy it to local memory.
  const int tile = blockIdx.x;
  const int seg = tile < p.seg_end[0] ? 0 : (tile < p.seg_end[1] ? 1 : 2);
  const int unit = tile - (seg == 0 ? 0 : (seg == 1 ? p.seg_end[0] : p.seg_end[1]));
  const int64_t K = int64_t(p.k_chunks) * Tr::kChunk;
  const int c0 = static_cast<int>(int64_t(p.k_chunks) * blockIdx.z / gridDim.z);
  const int c1 = static_cast<int>(int64_t(p.k_chunks) * (blockIdx.z + 1) / gridDim.z);
  const int sets = (c1 - c0 + Tr::kChunksPerSet - 1) / Tr::kChunksPerSet;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane >> 2, q = lane & 3;

  // A programmatic dependent may launch now; it waits for this grid's end.
  device::launch_dependents();

  const bf16* w = (seg == 0 ? p.w[0] : (seg == 1 ? p.w[1] : p.w[2])) +
                  (int64_t(unit) * kUnit + warp * Tr::kGroups * 8 + g) * K + q * 8;
  // One commit group per set, empty past the last, so that the waits count evenly.
  const auto issue_set = [&](int set) {
    if (set < sets) {
      const uint32_t slot = ring + (set % Tr::kStages) * Tr::kSetBytes;
#pragma unroll
      for (int u = 0; u < Tr::kChunksPerSet; ++u) {
        const int c = c0 + set * Tr::kChunksPerSet + u;
#pragma unroll
        for (int j = 0; j < Tr::kGroups; ++j) {
          // A chunk past the CTA's share reads nothing; its address stays on the last live chunk all the same.
          copy_stream(slot + (u * Tr::kGroups + j) * Tr::kThreads * 16,
                      w + j * 8 * K + int64_t(min(c, c1 - 1)) * Tr::kChunk, c < c1);
        }
      }
    }
    device::cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < Tr::kStages - 1; ++s) issue_set(s);
  device::grid_dependency_wait();  // A may be the previous kernel's output (a no-op unless launched programmatically)

  const bf16* a_lo = p.a + int64_t(g) * p.a_row_stride + q * 8;  // A rows g and g + 8
  const bf16* a_hi = a_lo + 8 * p.a_row_stride;
  const bool lo_live = g < p.m, hi_live = g + 8 < p.m;
  float acc[Tr::kGroups][4];
#pragma unroll
  for (int j = 0; j < Tr::kGroups; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

  // A's fragments of a set, read one set ahead of their use: an L2 round trip per set would otherwise be exposed.
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  uint4 lo[Tr::kChunksPerSet], hi[Tr::kChunksPerSet];
  const auto load_a_set = [&](int set, uint4 (&l)[Tr::kChunksPerSet], uint4 (&h)[Tr::kChunksPerSet]) {
#pragma unroll
    for (int u = 0; u < Tr::kChunksPerSet; ++u) {
      const int c = c0 + set * Tr::kChunksPerSet + u;
      const bool live = c < c1;  // uniform per warp
      const int64_t k = int64_t(c) * Tr::kChunk;
      l[u] = live && lo_live ? skinny_detail::load_a(a_lo + k) : zero;
      h[u] = live && hi_live ? skinny_detail::load_a(a_hi + k) : zero;
    }
  };
  load_a_set(0, lo, hi);
  for (int i = 0; i < sets; ++i) {
    issue_set(i + Tr::kStages - 1);  // into the stage this thread emptied in the last iteration
    uint4 next_lo[Tr::kChunksPerSet], next_hi[Tr::kChunksPerSet];
    load_a_set(i + 1, next_lo, next_hi);
    device::cp_async_wait<Tr::kStages - 1>();  // set i has landed (this thread's pieces: its own copies)
    const uint32_t slot = ring + (i % Tr::kStages) * Tr::kSetBytes;
#pragma unroll
    for (int u = 0; u < Tr::kChunksPerSet; ++u) {
      uint4 wv[Tr::kGroups];
#pragma unroll
      for (int j = 0; j < Tr::kGroups; ++j) wv[j] = device::ld_shared_v4(slot + (u * Tr::kGroups + j) * Tr::kThreads * 16);
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        // The lane's values 4s..4s+3 of its chunk are its k slots 2q, 2q+1 (word 2s) and 2q+8, 2q+9 (word 2s+1).
        const uint32_t a[4] = {word(lo[u], 2 * s), word(hi[u], 2 * s), word(lo[u], 2 * s + 1), word(hi[u], 2 * s + 1)};
#pragma unroll
        for (int j = 0; j < Tr::kGroups; ++j) device::mma_bf16_16816(acc[j], a, word(wv[j], 2 * s), word(wv[j], 2 * s + 1));
      }
    }
#pragma unroll
    for (int u = 0; u < Tr::kChunksPerSet; ++u) {
      lo[u] = next_lo[u];
      hi[u] = next_hi[u];
    }
  }
  device::cp_async_wait<0>();  // only empty groups remain; then every thread is done with the ring
  __syncthreads();

  // Park the partial tile: the lane holds rows g, g + 8 and columns 2q, 2q + 1 of each of its warp's groups.
#pragma unroll
  for (int j = 0; j < Tr::kGroups; ++j) {
    const int col = (warp * Tr::kGroups + j) * 8 + 2 * q;
    if (lo_live) *reinterpret_cast<float2*>(&parked[g * Tr::kPartialStride + col]) = make_float2(acc[j][0], acc[j][1]);
    if (hi_live) {
      *reinterpret_cast<float2*>(&parked[(g + 8) * Tr::kPartialStride + col]) = make_float2(acc[j][2], acc[j][3]);
    }
  }

  // Epilogue rows, dealt to the cluster's CTAs round-robin, then to this CTA's warps.
  const int split = kCluster ? static_cast<int>(gridDim.z) : 1;
  const int rank = kCluster ? static_cast<int>(device::cluster_ctarank()) : 0;
  const auto row_of = [&](int i) { return rank + split * (warp + Tr::kWarps * i); };
  const bf16* norm_w = seg == 0 ? p.norm_weight[0] : (seg == 1 ? p.norm_weight[1] : p.norm_weight[2]);
  RopeRow<Tr::kCols> rope[Tr::kRowsPerWarp];  // requested before the barrier: their latency overlaps it
#pragma unroll
  for (int i = 0; i < Tr::kRowsPerWarp; ++i) {
    rope[i] = load_rope<Tr::kCols>(p.cos, p.sin, row_of(i), lane, norm_w != nullptr && row_of(i) < p.m);
  }
  float nw[Tr::kCols];
  load_norm_factors(norm_w, p.weight_offset, lane, nw);
  if constexpr (kCluster) {
    device::splitk::partials_parked();
  } else {
    __syncthreads();
  }

  bf16* const out = seg == 0 ? p.out[0] : (seg == 1 ? p.out[1] : p.out[2]);
  const bool head_major = seg == 0 ? p.head_major[0] : (seg == 1 ? p.head_major[1] : p.head_major[2]);
  const bool at_lens = seg == 0 ? p.at_lens[0] : (seg == 1 ? p.at_lens[1] : p.at_lens[2]);
  const int capacity = seg == 0 ? p.capacity[0] : (seg == 1 ? p.capacity[1] : p.capacity[2]);
  const int units = seg == 0 ? p.seg_end[0] : (seg == 1 ? p.seg_end[1] - p.seg_end[0] : p.seg_end[2] - p.seg_end[1]);
  const auto destination = [&](int row) {
    if (!head_major) return out + int64_t(row) * p.out_row_stride + int64_t(unit) * kUnit + Tr::kCols * lane;
    const int b = row / p.seq_len, t = row - b * p.seq_len;
    const int pos = t + (at_lens ? device::cached_tokens(p.lens[b], capacity, p.seq_len) : 0);
    return out + ((int64_t(b) * units + unit) * capacity + pos) * kUnit + Tr::kCols * lane;
  };
  const uint32_t parked_lane = device::smem_addr(parked) + Tr::kCols * lane * 4;
#pragma unroll
  for (int i = 0; i < Tr::kRowsPerWarp; ++i) {
    const int row = row_of(i);
    if (row >= p.m) break;  // uniform per warp: the shuffles stay full-warp
    float x[Tr::kCols];
#pragma unroll
    for (int v = 0; v < Tr::kCols; ++v) x[v] = 0.f;
    for (int r = 0; r < split; ++r) {
#pragma unroll
      for (int v = 0; v < Tr::kCols / 4; ++v) {
        const float4 part =
            device::splitk::load_partial<kCluster>(parked_lane + (row * Tr::kPartialStride + 4 * v) * 4, r);
        x[4 * v] += part.x;
        x[4 * v + 1] += part.y;
        x[4 * v + 2] += part.z;
        x[4 * v + 3] += part.w;
      }
    }
    uint32_t y[Tr::kCols / 2];
    finish_head_row(x, norm_w != nullptr, nw, rope[i], p.eps, lane, y);
    bf16* dst = destination(row);
    if constexpr (Tr::kCols == 4) {
      *reinterpret_cast<uint2*>(dst) = make_uint2(y[0], y[1]);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(y[0], y[1], y[2], y[3]);
    }
  }
  if constexpr (kCluster) device::splitk::partials_read();  // this CTA's partials stay alive for the others
}

}  // namespace gk::gemma3
