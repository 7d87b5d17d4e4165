// The layer's projection epilogue on the persistent head-tiled GEMM (common/head_gemm): each consumer thread
// holds rows g and g + 8 of its warp's 16, columns 8j + 2t (+1) of two heads (j < 16: the first). The output is
// rounded to bf16 as a separate projection would store it; normed segments (q, k) then get the per-head RMSNorm
// with (offset + w) and RoPE with the same roundings as the standalone pass (norm_rope.cu): a row's sum of squares
// is a quad reduction, and RoPE's partner d +/- 64 of column 8j + 2t is column 8(j +/- 8) + 2t, in the same
// thread. The finished bf16 pairs go through the warpgroup's staging in shared memory, one head at a time, and
// leave by TMA stores (rows past M are not written). On the ping-pong schedule (store_rows) a warpgroup holds one
// head of 128 rows instead, as two halves of 64 rows in the same layout: the same code, with a part's rows and
// column chosen by kRows, and the RoPE tables loaded per part.

#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"
#include "common/head_gemm/head_gemm_sm90.cuh"

namespace gk::gemma3 {

struct HeadProjEpilogue {
  struct Params {
    // Each segment's output as [m, heads * 128] (row pitch: the q|k|v buffer's), boxes of 64 x 64.
    CUtensorMap out_map[head_gemm::Grid::kMaxSegments];
    const __nv_bfloat16* norm_weight[head_gemm::Grid::kMaxSegments];  // null: stored as computed
    const __nv_bfloat16* cos;                                         // [m, 128], for the normed segments
    const __nv_bfloat16* sin;
    float eps;
    float weight_offset;
  };
  // Named barriers of one consumer warpgroup (3 + cw): 1 is the consumers' stream-K meeting, 2 the tf32 preparation.
  static constexpr int kBarrier = 3;

  // One head of the warpgroup's rows through the staging (device::staged_write_head) and out by two TMA stores.
  // `pair(jl, hr)` gives the finished bf16 pair of n8 tile jl of the head in row r_lo + 8 hr. The staging is free once
  // this warpgroup's previous stores (the other head, or the previous tile's) have read it.
  template <class Pair>
  static __device__ __forceinline__ void stage_head(const CUtensorMap* map, int col, int row, uint32_t stage, int cw,
                                                    int r_lo, int t4, const Pair& pair) {
    device::staged_write_head(stage, kBarrier + cw, r_lo, t4, pair);
    device::staged_publish(kBarrier + cw);
    if (threadIdx.x % 128 == 0) {
      device::tma_store_2d(map, stage, col, row);
      device::tma_store_2d(map, stage + device::kStagedBoxBytes, col + 64, row);
      device::bulk_commit_group();
    }
  }

  // The accumulators stay fp32 values throughout (rounded in place where the pass rounds): packing bf16 pairs into
  // them for later bf16 arithmetic made ptxas wait for every K-block's wgmma group before the next (DEPBAR 0
  // instead of 1, no warning; docs/perf-log.md v22).
  static __device__ __forceinline__ void store(float (&acc)[32][4], const Params& p, const head_gemm::Tile& t, int m,
                                               int cw, int warp, int lane, uint32_t stage) {
    store_parts<false>(acc, p, t, m, cw, warp, lane, stage);
  }
  static __device__ __forceinline__ void store_rows(float (&acc)[32][4], const Params& p, const head_gemm::Tile& t,
                                                    int m, int cw, int warp, int lane, uint32_t stage) {
    store_parts<true>(acc, p, t, m, cw, warp, lane, stage);
  }

  // Part h of the accumulators (acc[16 h + jl]): head t.head0 + h of the warpgroup's 64 rows, or (kRows) rows
  // 64 h .. 64 h + 63 of the tile's one head.
  template <bool kRows>
  static __device__ __forceinline__ void store_parts(float (&acc)[32][4], const Params& p, const head_gemm::Tile& t,
                                                     int m, int cw, int warp, int lane, uint32_t stage) {
    const int g = lane >> 2, t4 = lane & 3;
    const int r_lo = warp * 16 + g;  // the thread's first row of the part's 64; the second is r_lo + 8
    const auto row_out = [&](int h) { return t.m0 + (kRows ? 64 * h : cw * 64); };
    const auto col = [&](int h) { return (t.head0 + (kRows ? 0 : h)) * 128; };
    const int parts = kRows ? 2 : t.heads;  // the segment's last pair may hold one head
    const __nv_bfloat16* nw = t.seg == 0 ? p.norm_weight[0] : (t.seg == 1 ? p.norm_weight[1] : p.norm_weight[2]);
    const CUtensorMap* map = t.seg == 0 ? &p.out_map[0] : (t.seg == 1 ? &p.out_map[1] : &p.out_map[2]);
    if (nw == nullptr) {  // uniform per CTA; packing rounds each value to bf16 once, as a plain projection stores it
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (h >= parts) break;  // uniform per CTA
        stage_head(map, col(h), row_out(h), stage, cw, r_lo, t4, [&](int jl, int hr) {
          return device::pack_bf16x2(acc[16 * h + jl][2 * hr], acc[16 * h + jl][2 * hr + 1]);
        });
      }
      return;
    }
    // The RoPE tables of the thread's two rows of part h. Loaded once for both heads: loaded per head after the
    // staging barrier (the second head's from L1 at best), 64 four-byte loads a thread and head, they drew ~2/3 of
    // this epilogue's stall samples (LSU throttle, long scoreboard: docs/perf-log.md v23). ptxas places them after
    // the norm, ahead of the first head's staging; loaded before the unit's mainloop they spilled. With kRows each
    // part has rows of its own, loaded per part: both parts' tables beside the accumulators would not fit. Rows past
    // M, which are not stored, read the last row's.
    uint32_t cs[2][16], sn[2][16];
    const auto load_tables = [&](int h) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int64_t at = int64_t(min(row_out(h) + r_lo + 8 * hr, m - 1)) * 128 + 2 * t4;
#pragma unroll
        for (int jl = 0; jl < 16; ++jl) {
          cs[hr][jl] = *reinterpret_cast<const uint32_t*>(p.cos + at + 8 * jl);
          sn[hr][jl] = *reinterpret_cast<const uint32_t*>(p.sin + at + 8 * jl);
        }
      }
    };
    if (!kRows) load_tables(0);
    // The projection's bf16 values, by packed conversions (one F2FP per pair, unpacked by integer ops): a scalar
    // round trip (round_bf16) is an F2F per value, 16 results per clock and SM against the packed form's 127
    // (gk_micro_mufu), and the 256 of them per thread and tile were most of this epilogue's issue time
    // (docs/perf-log.md, v23).
#pragma unroll
    for (int j = 0; j < 32; ++j) {
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const float2 r = device::unpack_bf16x2(device::pack_bf16x2(acc[j][e], acc[j][e + 1]));
        acc[j][e] = r.x;
        acc[j][e + 1] = r.y;
      }
    }
    float inv_rms[2][2];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        inv_rms[hr][h] = rsqrtf(head_gemm::head_sum_squares(acc, hr, h) * (1.f / 128) + p.eps);
      }
    }
    // The normalized head in place, in fp32: its rounding to bf16 is the pack in the staging below (the same bits
    // as rounding here). (offset + w) of dims 8 jl + 2t (+1) serves both heads and rows.
#pragma unroll
    for (int jl = 0; jl < 16; ++jl) {
      const float2 w = device::unpack_bf16x2(*reinterpret_cast<const uint32_t*>(nw + 8 * jl + 2 * t4));
      const float w0 = p.weight_offset + w.x, w1 = p.weight_offset + w.y;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          float* x = &acc[16 * h + jl][2 * hr];
          x[0] = x[0] * inv_rms[hr][h] * w0;
          x[1] = x[1] * inv_rms[hr][h] * w1;
        }
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (h >= parts) break;
      if (kRows) load_tables(h);
      // Dims d = 8 jl + 2t (+1) and their partners d -/+ 64 (n8 tile jl ^ 8), on bf16 pairs as the standalone pass
      // (the same bits as rounding each product and the sum): rotate_half gives dims below 64 -x[d + 64] (the sign
      // on sin), dims above x[d - 64].
      stage_head(map, col(h), row_out(h), stage, cw, r_lo, t4, [&](int jl, int hr) {
        // Each pair is packed once by the compiler, though named twice (as y, and as its partner's partner).
        const float* y = &acc[16 * h + jl][2 * hr];
        const float* partner = &acc[16 * h + (jl ^ 8)][2 * hr];
        return device::rope_bf16x2(device::pack_bf16x2(y[0], y[1]), device::pack_bf16x2(partner[0], partner[1]),
                                   cs[hr][jl], jl < 8 ? sn[hr][jl] ^ 0x80008000u : sn[hr][jl]);
      });
    }
  }
};

}  // namespace gk::gemma3
