// The layer's projection epilogue on the persistent head-tiled GEMM (common/head_gemm): each consumer thread
// holds rows g and g + 8 of its warp's 16, columns 8j + 2t (+1) of two heads (j < 16: the first). The output is
// rounded to bf16 as a separate projection would store it; normed segments (q, k) then get the per-head RMSNorm
// with (offset + w) and RoPE with the same roundings as the standalone pass (norm_rope.cu): a row's sum of squares
// is a quad reduction, and RoPE's partner d +/- 64 of column 8j + 2t is column 8(j +/- 8) + 2t, in the same
// thread. Stores go straight to global memory, two bf16 per thread and column pair.

#pragma once

#include <cuda_bf16.h>

#include "common/device/sm80_primitives.cuh"
#include "common/head_gemm/head_gemm_sm90.cuh"

namespace gk::gemma3 {

struct HeadProjEpilogue {
  struct Params {
    __nv_bfloat16* out[head_gemm::Grid::kMaxSegments];                // column 0 of each segment's first head
    const __nv_bfloat16* norm_weight[head_gemm::Grid::kMaxSegments];  // null: stored as computed
    int64_t out_row_stride;                                           // elements, shared by the segments
    const __nv_bfloat16* cos;                                         // [m, 128], for the normed segments
    const __nv_bfloat16* sin;
    float eps;
    float weight_offset;
  };

  static __device__ __forceinline__ float2 unpack(uint32_t v) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
  }

  static __device__ __forceinline__ void store(float (&acc)[32][4], const Params& p, const head_gemm::Tile& t, int m,
                                               int cw, int warp, int lane) {
    using device::round_bf16;
    const int g = lane >> 2, t4 = lane & 3;
    const int row0 = t.m0 + cw * 64 + warp * 16 + g;
    const __nv_bfloat16* nw = t.seg == 0 ? p.norm_weight[0] : (t.seg == 1 ? p.norm_weight[1] : p.norm_weight[2]);
    __nv_bfloat16* out = (t.seg == 0 ? p.out[0] : (t.seg == 1 ? p.out[1] : p.out[2])) + t.head0 * 128 + 2 * t4;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] = round_bf16(acc[j][e]);
    }
    if (nw == nullptr) {  // uniform per CTA
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int row = row0 + 8 * hr;
        if (row >= m) continue;
        __nv_bfloat16* o = out + int64_t(row) * p.out_row_stride;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          if (j >= 16 * t.heads) break;
          *reinterpret_cast<uint32_t*>(o + 8 * j) = device::pack_bf16x2(acc[j][2 * hr], acc[j][2 * hr + 1]);
        }
      }
      return;
    }

    float inv_rms[2][2];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        inv_rms[hr][h] = rsqrtf(head_gemm::head_sum_squares(acc, hr, h) * (1.f / 128) + p.eps);
      }
    }
    // The normalized head, rounded, in place; (offset + w) of dims 8 jl + 2t (+1) serves both heads and rows. The
    // norm and RoPE run as two passes so that only one set of per-dim factors is live at a time.
#pragma unroll
    for (int jl = 0; jl < 16; ++jl) {
      const float2 w = unpack(*reinterpret_cast<const uint32_t*>(nw + 8 * jl + 2 * t4));
      const float w0 = p.weight_offset + w.x, w1 = p.weight_offset + w.y;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          float* x = &acc[16 * h + jl][2 * hr];
          x[0] = round_bf16(x[0] * inv_rms[hr][h] * w0);
          x[1] = round_bf16(x[1] * inv_rms[hr][h] * w1);
        }
      }
    }
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int row = row0 + 8 * hr;
      if (row >= m) continue;
      uint32_t c_raw[16], s_raw[16];
#pragma unroll
      for (int jl = 0; jl < 16; ++jl) {
        c_raw[jl] = *reinterpret_cast<const uint32_t*>(p.cos + int64_t(row) * 128 + 8 * jl + 2 * t4);
        s_raw[jl] = *reinterpret_cast<const uint32_t*>(p.sin + int64_t(row) * 128 + 8 * jl + 2 * t4);
      }
      __nv_bfloat16* o = out + int64_t(row) * p.out_row_stride;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (h >= t.heads) break;  // uniform per CTA
#pragma unroll
        for (int jl = 0; jl < 8; ++jl) {
          // Dims d = 8 jl + 2t (+1) and their partners d + 64; rotate_half: dims below 64 take -x[d + 64], dims
          // above take x[d - 64].
          const float2 cl = unpack(c_raw[jl]), ch = unpack(c_raw[jl + 8]);
          const float2 sl = unpack(s_raw[jl]), sh = unpack(s_raw[jl + 8]);
          const float* lo = &acc[16 * h + jl][2 * hr];
          const float* hi = &acc[16 * h + jl + 8][2 * hr];
          const uint32_t out_lo = device::pack_bf16x2(round_bf16(lo[0] * cl.x) + round_bf16(-hi[0] * sl.x),
                                                      round_bf16(lo[1] * cl.y) + round_bf16(-hi[1] * sl.y));
          const uint32_t out_hi = device::pack_bf16x2(round_bf16(hi[0] * ch.x) + round_bf16(lo[0] * sh.x),
                                                      round_bf16(hi[1] * ch.y) + round_bf16(lo[1] * sh.y));
          *reinterpret_cast<uint32_t*>(o + h * 128 + 8 * jl) = out_lo;
          *reinterpret_cast<uint32_t*>(o + h * 128 + 8 * (jl + 8)) = out_hi;
        }
      }
    }
  }
};

}  // namespace gk::gemma3
