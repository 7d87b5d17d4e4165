// The audio QKV projection's exact mode as one Hopper kernel: 3xTF32 on tensor cores. Every fp32 operand x is
// made into two tf32 parts, big = x rounded to nearest tf32 and small = (x - big) rounded to nearest tf32 (x - big
// is exact), and
//   x * w ~= xs * wb + xb * ws + xb * wb
// (the dropped xs * ws is below 2^-22 |x w|; each product of two tf32 values is exact in fp32).
//
// Why a kernel of our own: the tensor core's fp32 accumulation drops low bits as its running sum grows, so the
// error of a long K chain grows with its length, and 3xTF32 as one GEMM over a 3x longer K (cuBLASLt) lost most of
// its accuracy that way (docs/perf-log.md v5.5). Here each K-block's 12 MMAs (4 k-steps x 3 products) accumulate
// into a fresh block accumulator that is then added to the running fp32 total with an ordinary FADD
// ("promotion"), so no tensor-core chain is longer than one K-block.
//
// Tile and epilogue as in the tf32 kernel (qkv_tf32_splitk_sm90.cuh): a CTA computes one head of q, k or v for 128
// rows, warpgroups 0 and 1 consume 64 rows each; warpgroup 2 is warps 8-10, the part warps, which make each landed
// stage into its tf32 parts (raw fp32 -> big in place + small beside it; only the weight tile when the activations
// arrive as parts made by a pass before the kernel, p.a_prepared), and warp 11 issuing the TMA loads. Registers
// move from warpgroup 2 to the consumers (setmaxnreg), which hold the total and two block accumulators (one in
// flight, one being promoted). With small M, K is split over a cluster (split-K, qkv_epilogue.cuh).
// (The register budget is exact: 384 x 168 at launch = 128 x 56 + 256 x 224 after the moves.)
#pragma once

#include <cuda_runtime.h>

#include "audio_qkv/params.hpp"
#include "audio_qkv/qkv_epilogue.cuh"
#include "audio_qkv/qkv_ring.cuh"
#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"
#include "common/device/splitk_reduce.cuh"

namespace gk::audio {

struct Qkv3xTf32Traits {
  static constexpr int kBM = 128, kBN = 128, kBK = 32;  // kBK fp32 = 128 bytes: one swizzle row
  static constexpr int kStages = 3;
  static constexpr int kThreads = 384;
  static constexpr int kPartThreads = 96;                 // warps 8-10: the part warps
  static constexpr uint32_t kTileBytes = kBM * kBK * 4;   // 16 KB (kBN == kBM)
  static constexpr uint32_t kRawBytes = 2 * kTileBytes;   // A then B, as TMA lands them; big parts after the part warps
  static constexpr int kAParts = 2;                       // activation rows a preparing pass writes per row
  static constexpr uint32_t kStageBytes = 2 * kRawBytes;  // + A small, B small at the same offsets
  static constexpr int kConsumerWarps = 8;
  static constexpr size_t kSmemBytes = 1024 + size_t(kStages) * kStageBytes + 3 * 8 * kStages;
  // setmaxnreg moves registers within what the CTA got at launch: 384 threads x 168 (ptxas's limit for one CTA of
  // 384 per SM); asking for more than that would stall the warpgroups for ever.
  static constexpr int kConsumerRegs = 224, kOtherRegs = 56;
  static_assert(kBM == QkvTile::kRows && kBN == QkvTile::kCols, "the epilogue's tile");
  static_assert(QkvTile::kParkBytes <= size_t(kStages) * kStageBytes, "partials fit in the ring");
  static_assert(256 * kConsumerRegs + 128 * kOtherRegs <= kThreads * (65536 / kThreads / 8 * 8), "register budget");
};

namespace qkv3_detail {

// kBytes of a landed stage from `stage` made into tf32 parts by the 96 part-warp threads: the raw A and B tiles
// (one contiguous 32 KB run; the parts are elementwise, so the swizzle carries over), or the B tile alone when A
// arrives as parts, become big in place and small kRawBytes further on. The part warps pace the kernel (an
// instruction more per element shows: docs/perf-log.md v10), so loads go out kBatch chunks at a time before any
// arithmetic, and a batch whose values all lie below the smallest magnitude whose rounding overflows to Inf (one
// NaN-propagating maximum; NaN and Inf fail it) takes the bare integer rounding: 5 instructions per element
// instead of 10.
template <uint32_t kBytes>
__device__ __forceinline__ void make_parts(uint32_t stage, int t) {
  using Tr = Qkv3xTf32Traits;
  constexpr int kChunks = kBytes / 16;
  constexpr int kPer = (kChunks + Tr::kPartThreads - 1) / Tr::kPartThreads;
  constexpr int kBatch = 4;
  constexpr uint32_t kMask = 0xffffe000u;
#pragma unroll 1
  for (int j0 = 0; j0 < kPer; j0 += kBatch) {
    uint32_t x[4 * kBatch], big[4 * kBatch], small[4 * kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int c = t + Tr::kPartThreads * (j0 + j);
      const uint4 v = c < kChunks ? device::ld_shared_v4(stage + 16u * c) : make_uint4(0, 0, 0, 0);
      x[4 * j] = v.x;
      x[4 * j + 1] = v.y;
      x[4 * j + 2] = v.z;
      x[4 * j + 3] = v.w;
    }
    // 0x7f7ff000: the smallest magnitude whose rounding overflows to Inf.
    if (__builtin_expect(device::max_abs_nan(x) < __int_as_float(0x7f7ff000), 1)) {
#pragma unroll
      for (int i = 0; i < 4 * kBatch; ++i) {
        big[i] = (x[i] + 0x1000u) & kMask;
        small[i] = (__float_as_uint(__uint_as_float(x[i]) - __uint_as_float(big[i])) + 0x1000u) & kMask;
      }
    } else {
#pragma unroll
      for (int i = 0; i < 4 * kBatch; ++i) {
        const float b = device::round_tf32(__uint_as_float(x[i]));
        big[i] = __float_as_uint(b);
        small[i] = __float_as_uint(device::tf32_small_part(__uint_as_float(x[i]), b));
      }
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int c = t + Tr::kPartThreads * (j0 + j);
      if (c >= kChunks) continue;
      device::st_shared_v4(stage + 16u * c, make_uint4(big[4 * j], big[4 * j + 1], big[4 * j + 2], big[4 * j + 3]));
      device::st_shared_v4(stage + Tr::kRawBytes + 16u * c,
                           make_uint4(small[4 * j], small[4 * j + 1], small[4 * j + 2], small[4 * j + 3]));
    }
  }
}

}  // namespace qkv3_detail

template <bool kClusterSplit>
__global__ void __launch_bounds__(Qkv3xTf32Traits::kThreads, 1)
    audio_qkv_3xtf32_kernel(const __grid_constant__ CUtensorMap hs_map, const __grid_constant__ CUtensorMap wq_map,
                            const __grid_constant__ CUtensorMap wk_map, const __grid_constant__ CUtensorMap wv_map,
                            const QkvGemmParams p) {
  using Tr = Qkv3xTf32Traits;
  extern __shared__ unsigned char smem_raw[];
  const QkvRing<Tr> ring(smem_raw);  // ready = made into tf32 parts
  const auto stage = [&](int s) { return ring.stage(s); };

  const int n_tile = blockIdx.x;  // which * heads + head
  const int which = n_tile / p.heads, head = n_tile % p.heads;
  const int m0 = blockIdx.y * Tr::kBM;
  const int kb0 = blockIdx.z * p.k_blocks;
  const int lane = threadIdx.x % 32;

  if (threadIdx.x == 0) ring.init(Tr::kPartThreads);
  __syncthreads();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 2) {
    device::regs_dealloc<Tr::kOtherRegs>();
    if (threadIdx.x / 32 == 11) {
      // ---------------- TMA warp ----------------
      if (lane == 0) {
        const CUtensorMap* w_map = which == 0 ? &wq_map : (which == 1 ? &wk_map : &wv_map);
        // With the activations' parts made beforehand this kernel is a programmatic dependent of that pass: wait
        // for it (a no-op otherwise) and order its writes before these TMA reads. Their small parts are rows
        // M .. 2M - 1.
        device::grid_dependency_wait();
        device::fence_proxy_async_global();
        ring.load(&hs_map, w_map, kb0, p.k_blocks, m0, head * Tr::kBN, p.a_prepared ? p.m : -1);
      }
    } else {
      // ---------------- part warps ----------------
      const int t = threadIdx.x - 256;
      for (int i = 0; i < p.k_blocks; ++i) {
        const int s = ring.pipe.stage(i);
        ring.pipe.consumer_wait(i);
        if (p.a_prepared) {
          qkv3_detail::make_parts<Tr::kTileBytes>(stage(s) + Tr::kTileBytes, t);
        } else {
          qkv3_detail::make_parts<Tr::kRawBytes>(stage(s), t);
        }
        device::fence_proxy_async_shared();  // wgmma reads through the async proxy
        device::mbar_arrive(ring.ready(s));
      }
    }
    if constexpr (kClusterSplit) {
      device::splitk::partials_parked();
      device::splitk::partials_read();
    }
    return;
  }

  // ---------------- consumers ----------------
  device::regs_alloc<Tr::kConsumerRegs>();
  const int wg = warpgroup;
  float acc[16][4];     // the promoted fp32 total
  float blk[2][16][4];  // block accumulators: one in flight, one being promoted
#pragma unroll
  for (int j = 0; j < 16; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

  // Issues K-block i's 12 MMAs into `d`; the first starts a fresh sum, so each block's chain starts at zero.
  const auto issue = [&](float (&d)[16][4], int i) {
    const int s = ring.pipe.stage(i);
    ring.ready_wait(i);
    device::wgmma_fence();
    const uint32_t a_big = stage(s) + wg * 64 * 128, b_big = stage(s) + Tr::kTileBytes;
    const uint32_t a_small = a_big + Tr::kRawBytes, b_small = b_big + Tr::kRawBytes;
#pragma unroll
    for (int kk = 0; kk < Tr::kBK / 8; ++kk) {
      // 8 tf32 = 32 bytes along the swizzled row; per k-step the two small products go in before the big one (the
      // block's chain is only 12 MMAs long, so their order barely matters: the promotion is what keeps error low).
      const uint32_t o = kk * 32;
      device::wgmma_m64n128k8_tf32_ss(d, device::smem_desc_sw128(a_small + o, 16, 1024),
                                      device::smem_desc_sw128(b_big + o, 16, 1024), kk > 0);
      device::wgmma_m64n128k8_tf32_ss(d, device::smem_desc_sw128(a_big + o, 16, 1024),
                                      device::smem_desc_sw128(b_small + o, 16, 1024), 1);
      device::wgmma_m64n128k8_tf32_ss(d, device::smem_desc_sw128(a_big + o, 16, 1024),
                                      device::smem_desc_sw128(b_big + o, 16, 1024), 1);
    }
    device::wgmma_commit();
  };
  // Adds a finished block into the total and frees its stage.
  const auto promote = [&](float (&d)[16][4], int i) {
    device::fence_accumulators(d);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      acc[j][0] += d[j][0];
      acc[j][1] += d[j][1];
      acc[j][2] += d[j][2];
      acc[j][3] += d[j][3];
    }
    if (lane == 0) ring.pipe.consumer_release(i);
  };

  // Two blocks per trip, each accumulator array indexed by a constant: block i+1's MMAs run while block i is
  // promoted. Both groups are waited for within the trip: a group left in flight across the loop's back edge makes
  // ptxas serialize every wgmma of the kernel (C7514).
  int i = 0;
  for (; i + 1 < p.k_blocks; i += 2) {
    issue(blk[0], i);
    issue(blk[1], i + 1);
    device::wgmma_wait<1>();
    promote(blk[0], i);
    device::wgmma_wait<0>();
    promote(blk[1], i + 1);
  }
  if (i < p.k_blocks) {  // an odd count (a K split's share)
    issue(blk[0], i);
    device::wgmma_wait<0>();
    promote(blk[0], i);
  }

  store_qkv_tile<kClusterSplit>(acc, p, which, head, m0, wg, ring.base);
}

}  // namespace gk::audio
