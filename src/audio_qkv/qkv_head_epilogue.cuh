// The audio QKV epilogue on the persistent head-tiled GEMM (projection/head_gemm): each consumer thread holds rows
// g and g + 8 of its warp's 16, columns 8j + 2t (+1) of two heads (j < 16: the first) of q, k or v. q and k get
// the per-head RMSNorm with weight offset 0, x / sqrt(mean(x^2) + eps) * w, here as x times head_inv_rms_fast
// (qkv_epilogue.cuh: rsqrtf); v is stored as computed. A row's sum of squares over a head is a quad reduction; the
// stores go out 16 bytes per thread (store_group_pair16), two 32-byte sectors of a row per quad.
#pragma once

#include "audio_qkv/qkv_epilogue.cuh"
#include "projection/head_gemm/head_gemm_sm90.cuh"

namespace gk::audio {

struct HeadQkvEpilogue {
  struct Params {
    float* out[3];          // q, k, v: [m, heads * 128] each
    const float* norm[3];   // q and k norm weights [128]; null for v
    int64_t out_row_stride;  // heads * 128
    float eps;
  };

  static __device__ __forceinline__ void store(float (&acc)[32][4], const Params& p, const head_gemm::Tile& t, int m,
                                               int cw, int warp, int lane) {
    const int g = lane >> 2, t4 = lane & 3;
    const int row0 = t.m0 + cw * 64 + warp * 16 + g;
    const float* nw = t.seg == 0 ? p.norm[0] : (t.seg == 1 ? p.norm[1] : p.norm[2]);
    float* out = (t.seg == 0 ? p.out[0] : (t.seg == 1 ? p.out[1] : p.out[2])) + t.head0 * 128;
    if (nw != nullptr) {  // uniform per CTA
      // The weight pairs of the thread's columns, loaded once for both heads and rows, ahead of the scales' shuffle
      // reductions, so that their latency hides behind them (docs/perf-log.md v23).
      float2 w[16];
#pragma unroll
      for (int jl = 0; jl < 16; ++jl) w[jl] = __ldg(reinterpret_cast<const float2*>(nw + 8 * jl + 2 * t4));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float inv0 = head_inv_rms_fast(head_gemm::head_sum_squares(acc, 0, h), p.eps);
        const float inv1 = head_inv_rms_fast(head_gemm::head_sum_squares(acc, 1, h), p.eps);
#pragma unroll
        for (int jl = 0; jl < 16; ++jl) {
          float* x = acc[16 * h + jl];
          x[0] = x[0] * inv0 * w[jl].x;
          x[1] = x[1] * inv0 * w[jl].y;
          x[2] = x[2] * inv1 * w[jl].x;
          x[3] = x[3] * inv1 * w[jl].y;
        }
      }
    }
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int row = row0 + 8 * hr;
      float* o = out + int64_t(row) * p.out_row_stride;
#pragma unroll
      for (int j = 0; j < 32; j += 2) {
        if (j >= 16 * t.heads) break;  // uniform: a head's 16 groups never straddle a pair
        store_group_pair16</*kStreaming=*/true>(o + 8 * j, make_float2(acc[j][2 * hr], acc[j][2 * hr + 1]),
                           make_float2(acc[j + 1][2 * hr], acc[j + 1][2 * hr + 1]), t4, row < m);
      }
    }
  }
};

}  // namespace gk::audio
