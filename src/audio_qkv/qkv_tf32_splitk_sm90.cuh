// The audio QKV projection as one Hopper kernel: q|k|v = hs * [Wq; Wk; Wv]^T on tf32 tensor cores (wgmma) with
// v's inputs rounded to nearest tf32 (q's and k's may be read truncated: below), the per-head RMSNorm of q and k in
// the epilogue, outputs [M, H*128] each.
//
// A CTA computes a 128-row x 128-column tile: exactly one head of one of q, k, v, so a row's norm is local to the
// CTA. Roles, by warp (the form with rounding groups; the one without is below): warpgroups 0 and 1 consume 64
// rows each with wgmma.m64n128k8.tf32 from a 6-stage shared-memory ring, keeping one K-block's group in flight and
// releasing stages through empty barriers; warp 16 (warp 8 without rounding groups) issues TMA loads of each
// K-block (32 fp32 columns of 128 rows of hs and of the head's weight rows, 128-byte swizzle) as soon as its stage
// is free; warpgroups 2 and 3 round alternate landed stages to nearest tf32 in place and publish them on the
// stage's ready barrier (after a proxy fence: wgmma reads through the async proxy). When
// the activations arrive rounded (p.a_prepared: a pass before this kernel, which then launches as its programmatic
// dependent), the rounding groups round only the weight tile.
//
// q and k may skip the rounding (p.qk_truncated): the tensor cores then truncate their operands, and truncation's
// error is rounding's (same spread) plus a bias proportional to the product itself, which the per-head RMSNorm
// divides out wherever a head's mean square is well above eps (docs/perf-log.md v13). Their CTAs read the
// caller's activations (hs_raw_map), wait for no pass and run their consumers straight off the TMA barriers; only
// v's CTAs round.
//
// Why TMA and rounding in place: producers loading through registers and rounding on the way kept one K-block of
// loads in flight; TMA keeps the whole ring in flight, and two rounding groups on alternate stages keep the
// in-place rounding's shared-memory traffic off the critical path (docs/perf-log.md).
//
// A form without the rounding groups (kRounding = false, 9 warps) takes launches where q's and k's CTAs read
// truncated and the activations arrive rounded: v's CTAs then compute the tile's transpose, their weight tile as the
// wgmma's A operand loaded by ldmatrix and rounded in registers, the activation tile as B. With 17 warps ptxas
// caps a thread at 96 registers, too few for the fragments beside the accumulators; with 9 it takes 122.
//
// Small M (few row tiles) splits K across a cluster of 2 or 4 CTAs along z (split-K): each computes a partial tile,
// parks it in its own shared memory, and after a cluster barrier every CTA reduces a quarter (half) of the rows over
// the cluster through distributed shared memory (device::splitk), normalizes and stores them.
#pragma once

#include <cuda_runtime.h>

#include "audio_qkv/params.hpp"
#include "audio_qkv/qkv_epilogue.cuh"
#include "audio_qkv/qkv_ring.cuh"
#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_gemm_primitives.cuh"
#include "common/device/sm90_primitives.cuh"
#include "common/device/splitk_reduce.cuh"

namespace gk::audio {

struct QkvGemmTraits {
  static constexpr int kBM = 128, kBN = 128, kBK = 32;  // kBK fp32 = 128 bytes: one swizzle row
  static constexpr int kStages = 6;
  static constexpr int kRoundGroups = 2;  // warpgroups 2, 3: group g rounds stages g, g + 2, g + 4
  static constexpr int kThreads = 128 * (2 + kRoundGroups) + 32;  // + the TMA warp
  // Without rounding groups (every CTA truncated or rounding in registers): 9 warps, so the consumers get the
  // registers for their fragments (with 17 warps ptxas caps a thread at 96).
  static constexpr int kThreadsNoRounding = 128 * 2 + 32;
  static constexpr int threads(bool rounding) { return rounding ? kThreads : kThreadsNoRounding; }
  static constexpr uint32_t kTileBytes = kBM * kBK * 4;  // 16 KB (kBN == kBM)
  static constexpr int kAParts = 1;                       // activation rows a preparing pass writes per row
  static constexpr uint32_t kStageBytes = 2 * kTileBytes;
  static constexpr int kConsumerWarps = 8;
  static constexpr size_t kSmemBytes = 1024 + size_t(kStages) * kStageBytes + 3 * 8 * kStages;
  static_assert(kStages % kRoundGroups == 0, "each rounding group owns whole ring slots");
  static_assert(kBM == QkvTile::kRows && kBN == QkvTile::kCols, "the epilogue's tile");
  static_assert(QkvTile::kParkBytes <= size_t(kStages) * kStageBytes, "partials fit in the ring");
};

// kClusterSplit: K is split over the CTAs of a cluster along z (cluster size = gridDim.z), reduced through DSMEM.
// kRounding = false: the form without rounding groups, for a launch where q's and k's CTAs read truncated and v's
// round in registers (the host launches it only so; the CTA's roles then follow from `which` alone).
template <bool kClusterSplit, bool kRounding = true>
__global__ void __launch_bounds__(QkvGemmTraits::threads(kRounding), 1)
    audio_qkv_gemm_kernel(const __grid_constant__ CUtensorMap hs_map, const __grid_constant__ CUtensorMap hs_raw_map,
                          const __grid_constant__ CUtensorMap wq_map, const __grid_constant__ CUtensorMap wk_map,
                          const __grid_constant__ CUtensorMap wv_map, const QkvGemmParams p) {
  using Tr = QkvGemmTraits;
  extern __shared__ unsigned char smem_raw[];
  const QkvRing<Tr> ring(smem_raw);  // ready = rounded
  const auto stage_a = [&](int s) { return ring.stage(s); };
  const auto stage_b = [&](int s) { return ring.stage(s) + Tr::kTileBytes; };

  const int n_tile = blockIdx.x;  // which * heads + head
  const int which = n_tile / p.heads, head = n_tile % p.heads;
  const int m0 = blockIdx.y * Tr::kBM;
  const int kb0 = blockIdx.z * p.k_blocks;
  const int lane = threadIdx.x % 32;
  const bool truncated = (!kRounding || p.qk_truncated) && which < 2;  // uniform per CTA
  const bool v_regs = !kRounding && which == 2;  // uniform per CTA: weights rounded in registers, a transposed tile

  if (threadIdx.x == 0) ring.init(128);
  __syncthreads();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup >= 2) {
    if (warpgroup == (kRounding ? 4 : 2)) {
      // ---------------- TMA warp ----------------
      if (lane == 0) {
        const CUtensorMap* w_map = which == 0 ? &wq_map : (which == 1 ? &wk_map : &wv_map);
        if (!truncated) {
          // With pre-rounded activations this kernel is a programmatic dependent of their rounding: wait for it
          // (a no-op otherwise) and order its writes before these TMA reads. Truncated CTAs read only the
          // caller's tensors, complete before the pass started.
          device::grid_dependency_wait();
          device::fence_proxy_async_global();
        }
        ring.load(truncated ? &hs_raw_map : &hs_map, w_map, kb0, p.k_blocks, m0, head * Tr::kBN);
      }
    } else if constexpr (kRounding) {
      // ---------------- rounding groups ----------------
      const int group = warpgroup - 2, t = threadIdx.x % 128;
      for (int i = group; i < (truncated ? 0 : p.k_blocks); i += Tr::kRoundGroups) {
        const int s = ring.pipe.stage(i);
        ring.pipe.consumer_wait(i);
        // All of a stage's loads before any store (device::round_tf32_smem): the rounding groups pace the kernel,
        // and smaller batches spent most of a stage on shared-memory round trips. With pre-rounded activations,
        // the weights only.
        constexpr int kPerA = Tr::kStageBytes / 16 / 128, kPerB = Tr::kTileBytes / 16 / 128;
        if (p.a_prepared) {
          device::round_tf32_smem<Tr::kTileBytes, 128, kPerB>(stage_b(s), t);
        } else {
          device::round_tf32_smem<Tr::kStageBytes, 128, kPerA>(stage_a(s), t);
        }
        device::fence_proxy_async_shared();
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
  const int wg = warpgroup;
  float acc[16][4];
#pragma unroll
  for (int j = 0; j < 16; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

  if (v_regs) {  // false at compile time in the form with rounding groups (its 96 registers)
    // out^T = W * A^T: this warpgroup's 64 weight rows (head dims) by all 128 token rows, so the weights pass
    // through registers, rounded to nearest on the way, and no rounding group paces the CTA (the activations
    // arrive rounded). The fragments by ldmatrix as the persistent kernel takes its A (head_gemm_sm90.cuh): lane l
    // addresses row l % 16 of the warp's 16 and the 16-byte chunk 2 kk + l / 16 of the swizzled row. K-blocks in
    // pairs, so that the fragment buffer an in-flight group reads is a compile-time index: p.k_blocks must be even
    // (the launcher takes this form only then; with an odd count the last pair would wait on a stage never loaded).
    const int r = wg * 64 + (threadIdx.x / 32) % 4 * 16 + lane % 16;
    const uint32_t row_off = r * 128, hi = lane / 16, r7 = r % 8;
    constexpr int kKSteps = Tr::kBK / 8;
    uint32_t frag[2][kKSteps][4];
    for (int i = 0; i < p.k_blocks; i += 2) {
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int ii = i + q, s = ring.pipe.stage(ii);
        ring.pipe.consumer_wait(ii);
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
          device::ldmatrix_x4(stage_b(s) + row_off + (((2 * kk + hi) ^ r7) << 4), frag[q][kk]);
        }
        device::round_tf32_for_mma(reinterpret_cast<uint32_t(&)[kKSteps * 4]>(frag[q]));
        device::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
          device::wgmma_m64n128k8_tf32_rs(acc, frag[q][kk], device::smem_desc_sw128(stage_a(s) + kk * 32, 16, 1024));
        }
        device::wgmma_commit();
        device::wgmma_wait<1>();
        device::fence_accumulators(acc);
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) device::fence_fragment(frag[q ^ 1][kk]);  // retired now
        if (ii > 0 && lane == 0) ring.pipe.consumer_release(ii - 1);
      }
    }
    device::wgmma_wait<0>();
    device::fence_accumulators(acc);
    store_qkv_tile<kClusterSplit>(acc, p, which, head, m0, wg, ring.base, /*transposed=*/true);
    return;
  }

  for (int i = 0; i < p.k_blocks; ++i) {
    const int s = ring.pipe.stage(i);
    device::mbar_wait(truncated ? ring.pipe.full(s) : ring.ready(s), ring.pipe.parity(i));
    device::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Tr::kBK / 8; ++kk) {
      // 8 tf32 = 32 bytes along the swizzled row; this warpgroup's 64 rows start 64 * 128 bytes in.
      device::wgmma_m64n128k8_tf32_ss(acc, device::smem_desc_sw128(stage_a(s) + wg * 64 * 128 + kk * 32, 16, 1024),
                                      device::smem_desc_sw128(stage_b(s) + kk * 32, 16, 1024));
    }
    device::wgmma_commit();
    device::wgmma_wait<1>();
    device::fence_accumulators(acc);
    if (i > 0 && lane == 0) ring.pipe.consumer_release(i - 1);
  }
  device::wgmma_wait<0>();
  device::fence_accumulators(acc);

  store_qkv_tile<kClusterSplit>(acc, p, which, head, m0, wg, ring.base, /*transposed=*/false);
}

}  // namespace gk::audio
