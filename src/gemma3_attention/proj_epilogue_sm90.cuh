// The layer's projection epilogue on the persistent head-tiled GEMM (common/head_gemm): each consumer thread
// holds rows g and g + 8 of its warp's 16, columns 8j + 2t (+1) of two heads (j < 16: the first). The output is
// rounded to bf16 as a separate projection would store it; normed segments (q, k) then get the per-head RMSNorm
// with (offset + w) and RoPE with the same roundings as the standalone pass (norm_rope.cu): a row's sum of squares
// is a quad reduction, and RoPE's partner d +/- 64 of column 8j + 2t is column 8(j +/- 8) + 2t, in the same
// thread. The finished bf16 pairs go through the warpgroup's staging in shared memory, one head at a time, and
// leave by TMA stores (rows past M are not written).

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
  static constexpr uint32_t kBoxBytes = 64 * 128;  // 64 rows x 64 bf16 columns

  static __device__ __forceinline__ float2 unpack(uint32_t v) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
  }

  static __device__ __forceinline__ void store(float (&acc)[32][4], const Params& p, const head_gemm::Tile& t, int m,
                                               int cw, int warp, int lane, uint32_t stage) {
    using device::round_bf16;
    const int g = lane >> 2, t4 = lane & 3;
    const int r_lo = warp * 16 + g;  // the thread's first row of the warpgroup's 64; the second is r_lo + 8
    const int row0 = t.m0 + cw * 64 + r_lo;
    const __nv_bfloat16* nw = t.seg == 0 ? p.norm_weight[0] : (t.seg == 1 ? p.norm_weight[1] : p.norm_weight[2]);
    // The finished pairs replace the accumulators they come from: column pair 8j + 2t of row r_lo + 8 hr lies in
    // acc[j][2 hr] as a packed bf16x2 (a separate array would not fit the registers beside acc: ptxas spilled).
    const auto put = [&](int j, int hr, uint32_t packed) { acc[j][2 * hr] = __uint_as_float(packed); };
    if (nw == nullptr) {  // uniform per CTA; packing rounds each value to bf16 once, as a plain projection stores it
#pragma unroll
      for (int j = 0; j < 32; ++j) {
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) put(j, hr, device::pack_bf16x2(acc[j][2 * hr], acc[j][2 * hr + 1]));
      }
    } else {
#pragma unroll
      for (int j = 0; j < 32; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] = round_bf16(acc[j][e]);
      }
      float inv_rms[2][2];
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          inv_rms[hr][h] = rsqrtf(head_gemm::head_sum_squares(acc, hr, h) * (1.f / 128) + p.eps);
        }
      }
      // The normalized head as bf16 pairs in place; (offset + w) of dims 8 jl + 2t (+1) serves both heads and rows.
      // The norm and RoPE run as two passes so that only one set of per-dim factors is live at a time.
#pragma unroll
      for (int jl = 0; jl < 16; ++jl) {
        const float2 w = unpack(*reinterpret_cast<const uint32_t*>(nw + 8 * jl + 2 * t4));
        const float w0 = p.weight_offset + w.x, w1 = p.weight_offset + w.y;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int hr = 0; hr < 2; ++hr) {
            const float* x = &acc[16 * h + jl][2 * hr];
            put(16 * h + jl, hr, device::pack_bf16x2(x[0] * inv_rms[hr][h] * w0, x[1] * inv_rms[hr][h] * w1));
          }
        }
      }
      const auto bits = [&](int j, int hr) { return __float_as_uint(acc[j][2 * hr]); };
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int row = row0 + 8 * hr;
        uint32_t c_raw[16], s_raw[16];
#pragma unroll
        for (int jl = 0; jl < 16; ++jl) {
          // Rows past M are not stored; their cos/sin rows do not exist.
          c_raw[jl] = row < m ? *reinterpret_cast<const uint32_t*>(p.cos + int64_t(row) * 128 + 8 * jl + 2 * t4) : 0u;
          s_raw[jl] = row < m ? *reinterpret_cast<const uint32_t*>(p.sin + int64_t(row) * 128 + 8 * jl + 2 * t4) : 0u;
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int jl = 0; jl < 8; ++jl) {
            // Dims d = 8 jl + 2t (+1) and their partners d + 64, on bf16 pairs as the standalone pass does (the same
            // bits as rounding each product and the sum): rotate_half gives dims below 64 -x[d + 64] (the sign on
            // sin), dims above x[d - 64].
            const uint32_t lo = bits(16 * h + jl, hr), hi = bits(16 * h + jl + 8, hr);
            put(16 * h + jl, hr, device::rope_bf16x2(lo, hi, c_raw[jl], s_raw[jl] ^ 0x80008000u));
            put(16 * h + jl + 8, hr, device::rope_bf16x2(hi, lo, c_raw[jl + 8], s_raw[jl + 8]));
          }
        }
      }
    }
    const CUtensorMap* map = t.seg == 0 ? &p.out_map[0] : (t.seg == 1 ? &p.out_map[1] : &p.out_map[2]);
    const bool issuer = threadIdx.x % 128 == 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (h >= t.heads) break;  // uniform per CTA: the segment's last tile may hold one head
      // The staging is free once this warpgroup's previous stores (the last head, or the previous tile's) have
      // read it. In the TMA's 128-byte swizzle (16-byte chunk c of row r at c ^ (r % 8)) the writes are free of
      // bank conflicts: a warp's eight rows put each quad's 16 bytes in a different chunk.
      if (issuer) device::bulk_wait_read();
      device::named_barrier_sync(kBarrier + cw, 128);
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int r = r_lo + 8 * hr;
#pragma unroll
        for (int jl = 0; jl < 16; ++jl) {
          const uint32_t at = stage + (jl / 8) * kBoxBytes + r * 128 + ((((jl % 8) ^ (r & 7))) << 4) + t4 * 4;
          device::st_shared_b32(at, __float_as_uint(acc[16 * h + jl][2 * hr]));
        }
      }
      device::fence_proxy_async_shared();  // these writes, before the TMA unit reads them
      device::named_barrier_sync(kBarrier + cw, 128);
      if (issuer) {
        const int col = (t.head0 + h) * 128, row = t.m0 + cw * 64;
        device::tma_store_2d(map, stage, col, row);
        device::tma_store_2d(map, stage + kBoxBytes, col + 64, row);
        device::bulk_commit_group();
      }
    }
  }
};

}  // namespace gk::gemma3
