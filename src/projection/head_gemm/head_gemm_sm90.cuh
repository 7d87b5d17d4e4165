// Persistent head-tiled GEMM for Hopper in tf32: out = A[M, K] * W^T for up to three weight segments (q, k, v:
// each [heads * 128, K]), where every output tile is 128 rows x two heads (256 columns) of one segment, so that an
// epilogue can normalize whole heads in registers. The audio QKV projection runs on it past one wave of its split-K
// kernel (v's inputs rounded to nearest: A in registers on the way from shared memory, the weights from a rounded
// copy; q's and k's read truncated; per-head RMSNorm in the epilogue). History: docs/perf-log.md (v7-v27).
//
//  - The grid is persistent: clusters of two CTAs walk units of two row tiles and one head pair; the ring's
//    phases run on across units (device::Pipeline), so the producer loads the next unit while the consumers run
//    the epilogue.
//  - The two CTAs of a cluster share the weight tile: each loads one head's rows and multicasts them to both
//    (less L2 traffic per CTA; kept for the L2 headroom, docs/perf-log.md v8).
//  - The epilogue works on the accumulators in registers and stores straight to global memory.
//
// Roles: warpgroup 0 is the producer (one thread issues the TMA loads; its other three warps may round one
// segment's weights for the kernel itself: weight_prep.cuh); warpgroups 1 and 2 consume 64 rows each with one
// wgmma of N = 256 per K step (A from registers, loaded by ldmatrix and rounded on the way, B from shared memory),
// keeping one K-block's group in flight. A stage is released to the producers of both CTAs (each multicasts into
// the other's ring) by one arrival per consumer warp.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "common/device/pipeline.cuh"
#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_gemm_primitives.cuh"
#include "common/device/sm90_primitives.cuh"
#include "projection/head_gemm/stream_k.cuh"
#include "projection/head_gemm/unit_order.hpp"
#include "projection/head_gemm/weight_prep.cuh"

namespace gk::head_gemm {

// The units one launch walks (filled by the launcher, head_gemm_launch.cuh).
struct Grid {
  static constexpr int kMaxSegments = 3;
  int m;         // rows of A and of every output
  int k_blocks;  // 128-byte K-blocks of K
  int n_tiles;   // head-pair tiles over all segments
  int units;     // ceil(row tiles / 2) * n_tiles
  int seg_end[kMaxSegments];    // cumulative head-pair tiles: segment s owns [seg_end[s-1], seg_end[s])
  int seg_heads[kMaxSegments];  // heads of each segment (its last tile may hold one)
  unsigned round_a_segments;    // tf32: bit s set = segment s rounds its A fragments to nearest, else truncates
  int sk_unit0;                 // stream-K from this unit on (stream_k.cuh)
  int sk_run;                   // stream-K: K-blocks per cluster (even; head_gemm_launch's plan); 0: round-robin
  StreamK sk;
  UnitOrder order;  // which (row pair, tile) a unit index is (unit_order.hpp)
  WeightPrep prep;  // tf32: one segment's weights rounded by the kernel itself (weight_prep.cuh)
};

// What an epilogue is told about the tile it stores.
struct Tile {
  int seg;    // which weight segment
  int head0;  // the tile's first head within its segment
  int heads;  // heads of the tile that exist: 2, or 1 at the end of an odd segment
  int m0;     // the CTA's first row
};

// The kernel's one configuration: tf32 operands, both consumer warpgroups sharing a unit of 128 rows x two heads
// (64 rows each). The bf16 and ping-pong forms are retired (never the default: docs/perf-log.md v26, v27).
struct Tf32Config {
  static constexpr int kBM = 128, kHeadDim = 128;
  static constexpr int kHeadsPerTile = 2;
  static constexpr int kBN = kHeadsPerTile * kHeadDim;
  static constexpr int kElemBytes = 4;
  static constexpr int kBK = 128 / kElemBytes;  // one 128-byte swizzle row
  static constexpr int kInstK = 8;
  static constexpr int kKSteps = kBK / kInstK;  // wgmma per K-block and warpgroup
  static constexpr uint32_t kTileBytesA = kBM * 128;      // 16 KB
  static constexpr uint32_t kHeadBytesB = kHeadDim * 128;  // 16 KB: one head's weight rows
  static constexpr uint32_t kStageBytes = kTileBytesA + kHeadsPerTile * kHeadBytesB;
  static constexpr int kStages = 4;  // 192 KB of ring
  static_assert(kStageBytes % 1024 == 0, "stages on the 128-byte swizzle's 1 KB atoms");
  static constexpr int kClusterSize = 2;
  // The weight rows each CTA of the cluster loads and multicasts to both: one head of the pair.
  static constexpr int kBRowsPerRank = kHeadsPerTile * kHeadDim / kClusterSize;
  static constexpr int kConsumerWarps = 8;
  // Arrivals that free a stage: every warp that reads it, in both CTAs.
  static constexpr int kEmptyArrivals = kClusterSize * kConsumerWarps;
  static constexpr int kThreads = 384;
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  // The ring, its barriers (full, empty, then the preparation's three, in a 1 KB block) and the preparation's
  // chunk buffers (weight_prep.cuh).
  static constexpr size_t kBarrierBytes = 1024;
  static constexpr size_t kSmemBytes = 1024 + size_t(kStages) * kStageBytes + kBarrierBytes + PrepSmem::kBytes;
  // Within the 227 KB a CTA may have, with room for stream_k_meet's static word (ptxas: 16 bytes).
  static_assert(kSmemBytes + 64 <= 227 * 1024, "shared memory per CTA");
  // setmaxnreg moves registers within what the CTA was launched with (168 per thread under
  // __launch_bounds__(384, 1)); an increase that the freed registers cannot cover waits forever.
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static_assert(kProducerRegs * 128 + kConsumerRegs * 256 <= kLaunchRegs * kThreads, "the CTA's register pool");
};
using Config = Tf32Config;

// Unit order (unit_order.hpp): the head-pair tiles of one row pair, then the next row pair, or with the last
// segment's tiles of the first row pairs lagging behind (Operands::lag_last_segment). (Grouping row pairs into
// blocks of rows x tiles for L2 locality did not pay: docs/perf-log.md v8.)
// `heads_per_tile`: Config::kHeadsPerTile (the tiles of Grid::seg_end are that many heads wide).
__device__ __forceinline__ Tile decode_unit(const Grid& g, int unit, int rank, int heads_per_tile) {
  const UnitPos pos = unit_position(g.order, unit);
  const int n = pos.tile, pair = pos.pair;
  // Selects, not g.seg_end[seg]: a dynamic index into the parameter block would copy it to local memory.
  const int seg = n < g.seg_end[0] ? 0 : (n < g.seg_end[1] ? 1 : 2);
  const int first = seg == 0 ? 0 : (seg == 1 ? g.seg_end[0] : g.seg_end[1]);
  const int heads = seg == 0 ? g.seg_heads[0] : (seg == 1 ? g.seg_heads[1] : g.seg_heads[2]);
  Tile t;
  t.seg = seg;
  t.head0 = heads_per_tile * (n - first);
  t.heads = min(heads_per_tile, heads - t.head0);
  t.m0 = (2 * pair + rank) * 128;
  return t;
}

// For epilogues: the sum of squares of one head (h: 0 or 1) of one of the thread's two rows (hr) over the head's
// 128 columns, which a quad of threads holds between them (every thread of the warp must call it).
__device__ __forceinline__ float head_sum_squares(const float (&acc)[32][4], int hr, int h) {
  float ss = 0.f;
#pragma unroll
  for (int jl = 0; jl < 16; ++jl) {
    const float a = acc[16 * h + jl][2 * hr], b = acc[16 * h + jl][2 * hr + 1];
    ss += a * a + b * b;
  }
  ss += __shfl_xor_sync(0xffffffffu, ss, 1);
  return ss + __shfl_xor_sync(0xffffffffu, ss, 2);
}

// The shared-memory map: kStages stages (A, then B) from a 1024-byte aligned base, then the pipeline's barriers
// (full, empty) and the weight preparation's (weight_prep.cuh).
template <class Cfg>
struct Ring {
  uint32_t base, bar;
  __device__ explicit Ring(const unsigned char* smem_raw)
      : base(device::smem_base_1024(smem_raw)), bar(base + Cfg::kStages * Cfg::kStageBytes) {}
  __device__ uint32_t a(int s) const { return base + s * Cfg::kStageBytes; }
  __device__ uint32_t b(int s) const { return base + s * Cfg::kStageBytes + Cfg::kTileBytesA; }
  __device__ device::Pipeline<Cfg::kStages> pipe() const {
    return device::Pipeline<Cfg::kStages>{bar, bar + 8u * Cfg::kStages};
  }
  __device__ PrepSmem prep() const {
    return PrepSmem{bar + uint32_t(Cfg::kBarrierBytes), bar + 8u * 2 * Cfg::kStages, bar + 8u * (2 * Cfg::kStages + 2)};
  }
};

// Producer thread: every unit's K-blocks into the ring; A is this CTA's own, B one head of the pair per CTA,
// multicast to both.
template <class Cfg>
__device__ __forceinline__ void produce(const Ring<Cfg>& ring, const Grid& g, const CUtensorMap* a_map,
                                        const CUtensorMap* w0, const CUtensorMap* w1, const CUtensorMap* w2,
                                        int rank) {
  bool prepared = g.prep.seg < 0;  // the prepared segment's weights are ready for this thread's TMA reads
  device::tma_prefetch_descriptor(a_map);
  device::tma_prefetch_descriptor(w0);
  device::tma_prefetch_descriptor(w1);
  device::tma_prefetch_descriptor(w2);
  // Launched as a programmatic dependent of the kernel that wrote W (the tf32 weight rounding), this CTA may run
  // before that kernel ends: wait for it, and order its writes before these TMA reads. A no-op otherwise.
  device::grid_dependency_wait();
  device::fence_proxy_async_global();
  const auto pipe = ring.pipe();
  WorkWalk walk(g.units, g.k_blocks, g.sk_unit0, g.sk_run, blockIdx.x, gridDim.x);
  int it = 0;
  for (Work wk; walk.get(wk);) {
    const Tile t = decode_unit(g, wk.unit, rank, Cfg::kHeadsPerTile);
    if (!prepared && t.seg == g.prep.seg) {
      prep_wait_all(ring.prep());
      prepared = true;
    }
    const CUtensorMap* w = t.seg == 0 ? w0 : (t.seg == 1 ? w1 : w2);
    // Past the segment's last head (an odd segment's last pair): TMA reads zeros.
    const int w_row = t.head0 * Cfg::kHeadDim + rank * Cfg::kBRowsPerRank;
    for (int kb = wk.kb0; kb < wk.kb1; ++kb, ++it) {
      const int s = pipe.stage(it);
      const uint32_t full = pipe.producer_acquire(it, Cfg::kStageBytes);
      device::tma_load_2d(ring.a(s), a_map, full, kb * Cfg::kBK, t.m0);
      device::tma_load_2d_multicast(ring.b(s) + rank * Cfg::kBRowsPerRank * 128, w, full, kb * Cfg::kBK, w_row, 0x3);
    }
  }
}

// Frees use i's stage in both CTAs of the cluster: one arrival per consumer warp, from its lane 0.
template <class Cfg>
__device__ __forceinline__ void release_stage(int i, uint32_t empty0, uint32_t empty1) {
  if (threadIdx.x % 32 == 0) device::Pipeline<Cfg::kStages>::consumer_release_cluster(i, empty0, empty1);
}

// One consumer warpgroup's K loop over K-blocks [kb0, kb1) of a unit (an even count): acc = its 64 rows x 256
// columns. `it` counts K-blocks across units (the pipeline's use count); `empty0` / `empty1` are stage 0's empty
// barrier in cluster ranks 0 and 1. `round_a` (uniform): round the A fragments to nearest rather than let the
// tensor cores truncate them.
template <class Cfg>
__device__ __forceinline__ void mainloop(float (&acc)[32][4], const Ring<Cfg>& ring, int kb0, int kb1, int& it,
                                         int cw, uint32_t empty0, uint32_t empty1, bool round_a) {
  const auto release = [&](int i) { release_stage<Cfg>(i, empty0, empty1); };
  const auto pipe = ring.pipe();
  // Descriptors are built once: a stage or k-step offset is a plain add to the address field (addresses stay below
  // 256 KB, so the 14-bit field never carries), and they live in uniform registers (docs/perf-log.md v8).
  const uint64_t b_desc = device::smem_desc_sw128(ring.b(0), 16, 1024);
  const int lane = threadIdx.x % 32;
  // A fragments by ldmatrix: lane l addresses row (l % 16) of the warp's 16 and the 16-byte chunk 2 kk + l / 16
  // of the swizzled row (chunk c of row r sits at c ^ (r % 8)), giving a0..a3 of the m16n8k8 layout.
  const int r = cw * 64 + (threadIdx.x / 32) % 4 * 16 + lane % 16;
  const uint32_t row_off = r * 128, hi = lane / 16, r7 = r % 8;
  uint32_t frag[2][Cfg::kKSteps][4];
  // K-blocks in pairs, so that the fragment buffer an in-flight group reads is a compile-time index.
  for (int kb = kb0; kb < kb1; kb += 2) {
#pragma unroll
    for (int p = 0; p < 2; ++p, ++it) {
      const int s = pipe.stage(it);
      pipe.consumer_wait(it);
#pragma unroll
      for (int kk = 0; kk < Cfg::kKSteps; ++kk) {
        device::ldmatrix_x4(ring.a(s) + row_off + (((2 * kk + hi) ^ r7) << 4), frag[p][kk]);
      }
      if (round_a) device::round_tf32_for_mma(reinterpret_cast<uint32_t(&)[Cfg::kKSteps * 4]>(frag[p]));
      device::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Cfg::kKSteps; ++kk) {
        // 8 fp32 = 32 bytes along the swizzled rows.
        device::wgmma_m64n256k8_tf32_rs(acc, frag[p][kk], b_desc + uint32_t(s) * (Cfg::kStageBytes >> 4) + kk * 2,
                                        (kb - kb0 + p) | kk);
      }
      device::wgmma_commit();
      device::wgmma_wait<1>();
      device::fence_accumulators(acc);
#pragma unroll
      for (int kk = 0; kk < Cfg::kKSteps; ++kk) device::fence_fragment(frag[p ^ 1][kk]);  // retired now
      if (kb + p > kb0) release(it - 1);
    }
  }
  device::wgmma_wait<0>();
  device::fence_accumulators(acc);
  release(it - 1);
}

// Epilogue: struct with `Params` and
//   static void store(float (&acc)[32][4], const Params&, const Tile&, int m, int cw, int warp, int lane)
// called by every consumer thread once its accumulators are final (cw: consumer warpgroup 0/1, warp: 0..3 in it).
// The kernel waits for the bulk stores an epilogue's threads committed before it exits. Params is a
// __grid_constant__ kernel parameter: an epilogue may keep TMA descriptors in it.
template <class Cfg, class Epilogue>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    head_gemm_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap w0_map,
                     const __grid_constant__ CUtensorMap w1_map, const __grid_constant__ CUtensorMap w2_map,
                     const Grid g, const __grid_constant__ typename Epilogue::Params ep) {
  extern __shared__ unsigned char smem_raw[];
  const Ring<Cfg> ring(smem_raw);
  const int rank = static_cast<int>(blockIdx.z);  // the cluster spans z: (1, 1, 2)
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  if (threadIdx.x == 0) {
    ring.pipe().init(Cfg::kEmptyArrivals);
    const PrepSmem ps = ring.prep();
    device::mbar_init(ps.barrier(0), 1);
    device::mbar_init(ps.barrier(1), 1);
    device::mbar_init(ps.ready, 1);
    device::mbar_fence_init();
  }
  device::cluster_sync();  // the peer's barriers exist before any multicast or remote arrival reaches them

  if (warp < 4) {
    device::regs_dealloc<Cfg::kProducerRegs>();
    if (warp == 0 && lane == 0) produce<Cfg>(ring, g, &a_map, &w0_map, &w1_map, &w2_map, rank);
    if (warp > 0 && g.prep.seg >= 0) {
      prep_round_slice(g.prep, ring.prep(), threadIdx.x - 32, static_cast<int>(blockIdx.x) * Cfg::kClusterSize + rank,
                       static_cast<int>(gridDim.x) * Cfg::kClusterSize);
    }
  } else {
    device::regs_alloc<Cfg::kConsumerRegs>();
    const int cw = __shfl_sync(0xffffffffu, warp / 4 - 1, 0);  // warp-uniform as far as the compiler sees
    const uint32_t empty0 = device::cluster_map(ring.pipe().empty(0), 0);
    const uint32_t empty1 = device::cluster_map(ring.pipe().empty(0), 1);
    float acc[32][4];
    int it = 0;
    WorkWalk walk(g.units, g.k_blocks, g.sk_unit0, g.sk_run, blockIdx.x, gridDim.x);
    for (Work wk; walk.get(wk);) {
      const Tile t = decode_unit(g, wk.unit, rank, Cfg::kHeadsPerTile);
      mainloop<Cfg>(acc, ring, wk.kb0, wk.kb1, it, cw, empty0, empty1, (g.round_a_segments >> t.seg) & 1u);
      if (wk.kb0 > 0 || wk.kb1 < g.k_blocks) {
        // Barrier 1: the consumers' own (epilogues may use it too, never across this call).
        if (!stream_k_meet<1>(acc, g.sk, wk, blockIdx.x, rank, threadIdx.x - 128)) continue;
      }
      Epilogue::store(acc, ep, t, g.m, cw, warp % 4, lane);
    }
    device::bulk_wait_all();  // bulk stores an epilogue's threads committed (none where it issued none)
  }
  device::cluster_sync();  // no CTA leaves while its peer may still multicast into it or arrive on its barriers
}

}  // namespace gk::head_gemm
