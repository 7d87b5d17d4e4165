// Head-tiled bf16 projection GEMM for Hopper: out = A * W^T on wgmma with fp32 accumulation, where every CTA
// owns a 128-row output tile of one or two heads (128 or 256 columns) of one segment (q, k, v, or the O
// projection's output columns; with two heads per tile, a segment with an odd head count has a half-empty last
// tile: its weight rows past the segment read as zeros through TMA and are not stored). The q and k segments get
// the per-head RMSNorm and RoPE in the epilogue, so the packed q|k|v buffer leaves this kernel ready for the
// attention.
//
// The layer takes it for a single row tile (M = B*S <= 128), where a library GEMM is bound by the weight stream
// and by launches: K is split across a cluster of CTAs along z so that the stream spreads over most SMs, and the
// partial tiles are reduced through distributed shared memory (device::splitk). With more row tiles it runs two
// heads per tile, which halves the activation tile's share of what each SM pulls from L2, the bound there
// (docs/perf-log.md). Roles, by warp: warpgroups 0 and 1 consume 64 rows each (one
// wgmma.m64n128k16 per head per K step) from a TMA ring of 192 KB, keeping one K-block's group in flight and
// releasing stages through empty barriers; warp 8 issues the TMA loads, and once the mainloop no longer needs the
// memory bandwidth, an optional L2 prefetch for the kernels after (ProjGemmParams::l2_prefetch). The kernel lets a
// programmatically launched successor start from its first instruction.
//
// Epilogue: each CTA parks its fp32 partial tile in shared memory; after a cluster barrier every CTA reduces a
// share of the tile's rows over the cluster, one warp per (row, head) (lane l holds columns 4l..4l+3 of the
// head, so the RoPE partner d +/- 64 is lane l ^ 16), rounds to bf16 as a separate projection would, and for
// normed segments applies RMSNorm and RoPE with the same roundings as the standalone norm/RoPE kernel
// (norm_rope.cu). A head-row leaves as one 256-byte store per warp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "common/device/pipeline.cuh"
#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"
#include "common/device/splitk_reduce.cuh"
#include "projection/head_row.cuh"
#include "projection/params.hpp"

namespace gk::gemma3 {

template <int kHeadsPerTile>
struct ProjGemmTraits {
  static constexpr int kBM = 128, kHeadDim = 128, kHeads = kHeadsPerTile, kBK = 64;  // kBK: one 128-byte swizzle row
  static constexpr int kBN = kHeads * kHeadDim;
  static constexpr int kConsumerWarps = 8;
  static constexpr int kRowsPerWarp = kBM / kConsumerWarps;  // epilogue rows of a warp without a K split
  static constexpr int kRowBatch = 4;                        // epilogue rows reduced together
  static constexpr int kThreads = 32 * kConsumerWarps + 32;  // + the TMA warp
  static constexpr uint32_t kTileBytesA = kBM * kBK * 2;       // 16 KB
  static constexpr uint32_t kHeadBytesB = kHeadDim * kBK * 2;  // 16 KB per head
  static constexpr uint32_t kStageBytes = kTileBytesA + kHeads * kHeadBytesB;
  static constexpr int kStages = (192 * 1024) / kStageBytes;  // 6 stages of 32 KB, or 4 of 48 KB
  static constexpr int kPartialStride = kBN + 4;  // floats per parked row: the pad spreads rows over banks
  static constexpr size_t kSmemBytes = 1024 + size_t(kStages) * kStageBytes + 2 * 8 * kStages;
  static_assert(kHeads == 1 || kHeads == 2, "one or two heads per tile");
  static_assert(size_t(kBM) * kPartialStride * 4 <= size_t(kStages) * kStageBytes, "partials fit in the ring");
  static_assert(kRowsPerWarp % kRowBatch == 0, "whole row batches");
};


// kClusterSplit: K is split over the CTAs of a cluster along z (cluster size = gridDim.z), reduced through DSMEM.
template <int kHeads, bool kClusterSplit>
__global__ void __launch_bounds__(ProjGemmTraits<kHeads>::kThreads, 1)
    proj_gemm_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap w0_map,
                     const __grid_constant__ CUtensorMap w1_map, const __grid_constant__ CUtensorMap w2_map,
                     const ProjGemmParams p) {
  using Tr = ProjGemmTraits<kHeads>;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = device::smem_base_1024(smem_raw);
  const uint32_t bar = base + Tr::kStages * Tr::kStageBytes;
  const auto stage_a = [&](int s) { return base + s * Tr::kStageBytes; };
  const auto stage_b = [&](int s) { return base + s * Tr::kStageBytes + Tr::kTileBytesA; };
  const device::Pipeline<Tr::kStages> pipe{bar, bar + 8u * Tr::kStages};  // full: TMA landed; empty: consumed

  // Selects, not p.x[seg]: a dynamic index into the parameter block would copy it to local memory.
  const int tile = blockIdx.x;
  const int seg = tile < p.seg_end[0] ? 0 : (tile < p.seg_end[1] ? 1 : 2);
  const int head0 = Tr::kHeads * (tile - (seg == 0 ? 0 : (seg == 1 ? p.seg_end[0] : p.seg_end[1])));
  const int seg_heads = seg == 0 ? p.seg_heads[0] : (seg == 1 ? p.seg_heads[1] : p.seg_heads[2]);
  const int m0 = blockIdx.y * Tr::kBM;
  // This CTA's K-blocks: an even share of the total (any split, not only divisors).
  const int kb0 = static_cast<int>(int64_t(p.k_blocks) * blockIdx.z / gridDim.z);
  const int kb1 = static_cast<int>(int64_t(p.k_blocks) * (blockIdx.z + 1) / gridDim.z);
  const int lane = threadIdx.x % 32;
  const int warp_id = threadIdx.x / 32;

  // A kernel launched programmatically behind this one (the layer's attention, after the q|k|v projection) may start
  // now on the SMs this grid leaves free: it waits for this grid's completion before reading anything, and nothing
  // here reads what it writes. Without such a kernel this has no effect.
  device::launch_dependents();
  if (threadIdx.x == 0) {
    pipe.init(Tr::kConsumerWarps);
    device::mbar_fence_init();
  }
  __syncthreads();

  if (warp_id == Tr::kConsumerWarps) {
    // ---------------- TMA warp ----------------
    if (lane == 0) {
      const CUtensorMap* w_map = seg == 0 ? &w0_map : (seg == 1 ? &w1_map : &w2_map);
      device::tma_prefetch_descriptor(&a_map);
      device::tma_prefetch_descriptor(w_map);
      for (int i = 0; i < kb1 - kb0; ++i) {
        // Pipeline::producer_acquire's steps, spelled out: so written, the compiler unrolls this loop by the four
        // stages of the two-head kernels as it always has (through producer_acquire it does not).
        const int s = pipe.stage(i), round = i / Tr::kStages;
        const int col = (kb0 + i) * Tr::kBK;
        if (round > 0) device::mbar_wait(pipe.empty(s), uint32_t(round - 1) & 1u);
        device::mbar_arrive_expect_tx(pipe.full(s), Tr::kStageBytes);
        const uint32_t full = pipe.full(s);
        device::tma_load_2d(stage_a(s), &a_map, full, col, m0);
        device::tma_load_2d(stage_b(s), w_map, full, col, head0 * Tr::kHeadDim);  // both heads' rows: one box
      }
    }
    if constexpr (kClusterSplit) device::splitk::partials_parked();  // so the cluster's mainloop is done
    // The L2 prefetch hint, now that this CTA's weight stream no longer needs the memory bandwidth (without a
    // split, the last loads may still be in flight).
    if (lane == 0 && p.l2_prefetch_bytes != 0) {
      const uint64_t cta = (uint64_t(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
      device::bulk_prefetch_l2_share(p.l2_prefetch, p.l2_prefetch_bytes, cta,
                                     uint64_t(gridDim.x) * gridDim.y * gridDim.z);
    }
    if constexpr (kClusterSplit) device::splitk::partials_read();
    return;
  }

  // ---------------- consumers ----------------
  const int wg = warp_id / 4;
  const int warp = warp_id % 4;
  float acc[Tr::kHeads][16][4];
#pragma unroll
  for (int h = 0; h < Tr::kHeads; ++h) {
#pragma unroll
    for (int j = 0; j < 16; ++j) acc[h][j][0] = acc[h][j][1] = acc[h][j][2] = acc[h][j][3] = 0.f;
  }

  for (int i = 0; i < kb1 - kb0; ++i) {
    const int s = pipe.stage(i);
    pipe.consumer_wait(i);
    device::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Tr::kBK / 16; ++kk) {
      // 16 bf16 = 32 bytes along the swizzled row; this warpgroup's 64 rows start 64 * 128 bytes in.
      const uint64_t a_desc = device::smem_desc_sw128(stage_a(s) + wg * 64 * 128 + kk * 32, 16, 1024);
#pragma unroll
      for (int h = 0; h < Tr::kHeads; ++h) {
        device::wgmma_m64n128k16_ss(acc[h], a_desc,
                                    device::smem_desc_sw128(stage_b(s) + h * Tr::kHeadBytesB + kk * 32, 16, 1024), 1);
      }
    }
    device::wgmma_commit();
    device::wgmma_wait<1>();
#pragma unroll
    for (int h = 0; h < Tr::kHeads; ++h) device::fence_accumulators(acc[h]);
    if (i > 0 && lane == 0) pipe.consumer_release(i - 1);
  }
  device::wgmma_wait<0>();
#pragma unroll
  for (int h = 0; h < Tr::kHeads; ++h) device::fence_accumulators(acc[h]);

  // Park the partial tile (row-major, padded rows) over the ring, which both consumer warpgroups are done with
  // once they pass the named barrier. Thread holds rows g and g+8 of its warp's 16, columns 8j + 2t4 (+1) of
  // each head.
  device::named_barrier_sync(1, 32 * Tr::kConsumerWarps);
  const uint32_t parked = base;
  const int g = lane >> 2, t4 = lane & 3;
  // Rows past M (a short last tile, e.g. one decode token) are neither parked nor reduced: at M = 1 they were 127 of
  // the 128 rows the cluster summed over distributed shared memory.
  const int tile_rows = min(Tr::kBM, p.m - m0);
  if (wg * 64 + warp * 16 < tile_rows) {  // uniform per warp
#pragma unroll
    for (int h = 0; h < Tr::kHeads; ++h) {
      device::splitk::park_rows<Tr::kPartialStride>(parked, acc[h], wg * 64 + warp * 16 + g, h * Tr::kHeadDim, t4);
    }
  }

  // Epilogue rows: the tile's rows are dealt to the cluster's CTAs round-robin (any split), then to this CTA's
  // consumer warps; row i of this warp is row_of(i) of the tile, if below kBM.
  const int split = kClusterSplit ? static_cast<int>(gridDim.z) : 1;
  const int rank = kClusterSplit ? static_cast<int>(device::cluster_ctarank()) : 0;
  const auto row_of = [&](int i) { return rank + split * (warp_id + Tr::kConsumerWarps * i); };
  const __nv_bfloat16* norm_w = seg == 0 ? p.norm_weight[0] : (seg == 1 ? p.norm_weight[1] : p.norm_weight[2]);
  // The RoPE tables of this warp's rows, requested before the barrier so that their latency overlaps it.
  RopeRow<4> rope[Tr::kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < Tr::kRowsPerWarp; ++i) {
    rope[i] = load_rope<4>(p.cos, p.sin, m0 + row_of(i), lane, norm_w != nullptr && row_of(i) < tile_rows);
  }
  if constexpr (kClusterSplit) {
    device::splitk::partials_parked();
  } else {
    device::named_barrier_sync(1, 32 * Tr::kConsumerWarps);
  }

  __nv_bfloat16* out = (seg == 0 ? p.out[0] : (seg == 1 ? p.out[1] : p.out[2])) + head0 * Tr::kHeadDim + 4 * lane;
  float w[4];
  load_norm_factors(norm_w, p.weight_offset, lane, w);
  const int heads_here = min(Tr::kHeads, seg_heads - head0);

#pragma unroll
  for (int i0 = 0; i0 < Tr::kRowsPerWarp; i0 += Tr::kRowBatch) {
    if (row_of(i0) >= tile_rows) break;  // uniform per warp; rows grow with i
    // Sum the batch's partials over the cluster: all of the batch's loads are in flight together.
    float4 sum[Tr::kRowBatch][Tr::kHeads];
#pragma unroll
    for (int b = 0; b < Tr::kRowBatch; ++b) {
#pragma unroll
      for (int h = 0; h < Tr::kHeads; ++h) sum[b][h] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    for (int q = 0; q < split; ++q) {
#pragma unroll
      for (int b = 0; b < Tr::kRowBatch; ++b) {
        if (row_of(i0 + b) >= tile_rows) continue;
#pragma unroll
        for (int h = 0; h < Tr::kHeads; ++h) {
          const uint32_t local = parked + (row_of(i0 + b) * Tr::kPartialStride + h * Tr::kHeadDim + 4 * lane) * 4;
          device::splitk::add_f32x4(sum[b][h], device::splitk::load_partial<kClusterSplit>(local, q));
        }
      }
    }

#pragma unroll
    for (int b = 0; b < Tr::kRowBatch; ++b) {
      const int i = i0 + b;
      if (row_of(i) >= tile_rows) continue;  // uniform per warp: the shuffles stay full-warp
#pragma unroll
      for (int h = 0; h < Tr::kHeads; ++h) {
        if (h >= heads_here) break;  // uniform per CTA
        // The rounding by packed conversions (one F2FP per pair): a scalar round trip is an F2F per value, of far
        // lower throughput (docs/perf-log.md v23).
        const float x[4] = {sum[b][h].x, sum[b][h].y, sum[b][h].z, sum[b][h].w};
        uint32_t xp[2];
        finish_head_row(x, norm_w != nullptr, w, rope[i], p.eps, lane, xp);
        const int64_t at = int64_t(m0 + row_of(i)) * p.out_row_stride + h * Tr::kHeadDim;
        *reinterpret_cast<uint2*>(out + at) = make_uint2(xp[0], xp[1]);
      }
    }
  }
  if constexpr (kClusterSplit) device::splitk::partials_read();  // this CTA's partials stay alive for the others
}

}  // namespace gk::gemma3
