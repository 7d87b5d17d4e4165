// The audio QKV kernels' common epilogue (tf32 and 3xTF32): one 128-row x 128-column tile, exactly one head of
// q, k or v, held by two consumer warpgroups in the wgmma accumulator layout; q and k get the per-head RMSNorm
// (weight offset 0), v is stored as is. With a K split over a z-cluster, each CTA parks its partial tile in shared
// memory and reduces a share of the rows over the cluster through DSMEM before normalizing and storing. kUnscale
// (fp16 operands scaled per row: f16_rows.cuh): each sum is first divided by its row's and its column's powers of
// two (p.a_exps, p.w_exps), exactly where the result is a normal float.
#pragma once

#include <cuda_runtime.h>

#include "audio_qkv/f16_operands.hpp"
#include "audio_qkv/params.hpp"
#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"
#include "common/device/splitk_reduce.cuh"

namespace gk::audio {

// The audio norm's scale for a head whose 128 values square-sum to ss: 1 / sqrt(mean + eps), as the correctly
// rounded reciprocal of the correctly rounded square root. This epilogue (both modes) multiplies by it: within 1.5
// ulp of the definition's division, far inside both modes' error budgets, and a division per element was most of
// the epilogues' instructions.
__device__ __forceinline__ float head_inv_rms(float ss, float eps) {
  return __frcp_rn(__fsqrt_rn(ss * (1.f / 128) + eps));
}
// The same by rsqrtf (2 ulp), for the persistent tf32 epilogue (qkv_head_epilogue.cuh), where the correctly rounded
// pair's slow-path branches showed in the time (docs/perf-log.md v15).
__device__ __forceinline__ float head_inv_rms_fast(float ss, float eps) { return rsqrtf(ss * (1.f / 128) + eps); }

// Stores one row's two neighbouring column groups j0 and j0 + 1 (8 columns each; this thread holds columns 2 t4 and
// 2 t4 + 1 of each, v0 and v1) as 16-byte pieces: the quad's even threads take four consecutive columns of j0 and
// the odd ones four of j1, swapping one column pair with their neighbour. `row_j0` points at column 0 of group j0.
// The accumulator layout's own 8-byte stores were most of the epilogue's time. Every lane of the warp must call it
// (a shuffle); `store` = false only skips the write. `streaming`: as st.global.cs (evict first), which the
// persistent tf32 kernel's and the fp16 kernel's outputs are better off with, and the split-K tf32 kernel's not
// (docs/perf-log.md v14, v52).
template <bool kStreaming = false>
__device__ __forceinline__ void store_group_pair16(float* row_j0, float2 v0, float2 v1, int t4, bool store) {
  const bool even = (t4 & 1) == 0;
  const float2 send = even ? v1 : v0;
  const float2 recv = make_float2(__shfl_xor_sync(0xffffffffu, send.x, 1), __shfl_xor_sync(0xffffffffu, send.y, 1));
  const float4 q = even ? make_float4(v0.x, v0.y, recv.x, recv.y) : make_float4(recv.x, recv.y, v1.x, v1.y);
  float4* dst = reinterpret_cast<float4*>(row_j0 + (even ? 0 : 8) + 4 * (t4 >> 1));
  if (store) {
    if constexpr (kStreaming) {
      __stcs(dst, q);
    } else {
      *dst = q;
    }
  }
}

// fp16 operands: a sum scaled by 2^e divided back by one multiply, exact where the result is a normal float; for
// |row exponent|, |column exponent| <= 63 (unscale_fast_ok on both), whose sum's power of two is a normal float.
__device__ __forceinline__ bool unscale_fast_ok(int e) { return static_cast<unsigned>(e + 63) <= 126u; }
__device__ __forceinline__ float unscale_fast(float acc, int e) { return acc * f16::pow2(-e); }

struct QkvTile {
  static constexpr int kRows = 128, kCols = 128;
  static constexpr int kConsumerWarps = 8;
  static constexpr int kPartialStride = kCols + 4;  // floats per parked row: the pad spreads rows over banks
  static constexpr size_t kParkBytes = size_t(kRows) * kPartialStride * 4;
};

// The split-K epilogue's second half: this CTA's rows [rank * rows, (rank + 1) * rows) of the tile, summed over
// the kSplit parked partials through distributed shared memory (device::splitk: every remote load of the warp's
// rows issued before any is summed), normalized and stored; one warp per row, four columns per lane.
template <int kSplit, bool kUnscale>
__device__ __forceinline__ void reduce_store_rows(const QkvGemmParams& p, int which, float* out, int n_out, int m0,
                                                  uint32_t parked, uint32_t rank, const float4& wv4,
                                                  const int32_t* w_exps) {
  constexpr int kRows = QkvTile::kRows / kSplit, kRowsPerWarp = kRows / QkvTile::kConsumerWarps;
  const int cw = threadIdx.x / 32, lane = threadIdx.x % 32;  // consumer warp 0..7
  float4 part[kRowsPerWarp][kSplit];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int row_in_tile = static_cast<int>(rank) * kRows + cw + i * QkvTile::kConsumerWarps;
    device::splitk::load_ranks(part[i], parked + (row_in_tile * QkvTile::kPartialStride + 4 * lane) * 4);
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    float4 sum = device::splitk::sum_ranks(part[i]);
    if constexpr (kUnscale) {
      const int row = m0 + static_cast<int>(rank) * kRows + cw + i * QkvTile::kConsumerWarps;
      const int ra = row < p.m ? p.a_exps[row] : 0;
      const int4 wc = reinterpret_cast<const int4*>(w_exps)[lane];
      sum = make_float4(f16::unscale(sum.x, ra + wc.x), f16::unscale(sum.y, ra + wc.y),
                        f16::unscale(sum.z, ra + wc.z), f16::unscale(sum.w, ra + wc.w));
    }
    if (which < 2) {
      float ss = sum.x * sum.x + sum.y * sum.y + sum.z * sum.z + sum.w * sum.w;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
      const float inv = head_inv_rms(ss, p.eps);
      sum = make_float4(sum.x * inv * wv4.x, sum.y * inv * wv4.y, sum.z * inv * wv4.z, sum.w * inv * wv4.w);
    }
    const int row = m0 + static_cast<int>(rank) * kRows + cw + i * QkvTile::kConsumerWarps;
    if (row < p.m) reinterpret_cast<float4*>(out + int64_t(row) * n_out)[lane] = sum;
  }
}

// Where the fp16 epilogue reads its per-row and per-column inputs when a kernel has staged them (generic pointers,
// e.g. into shared memory): the tile's 128 row exponents (row - m0; zero past M), this head's 128 column exponents
// and its norm weights. Null: from the call's parameters (global memory).
struct StagedInputs {
  const int32_t* a_exps = nullptr;
  const int32_t* w_exps = nullptr;
  const float* norm_w = nullptr;
};

// A kernel's area for StagedInputs in shared memory, at shared address `addr` (past its barriers): kRows row
// exponents, kCols column exponents, then kNorm norm weights. Generic pointers, derived from the dynamic area's base.
template <int kRows, int kCols, int kNorm>
struct StagedArea {
  static constexpr int kWords = kRows + kCols + kNorm;
  int32_t* a;
  int32_t* w;
  float* n;
  __device__ __forceinline__ StagedArea(unsigned char* smem_raw, uint32_t addr)
      : a(reinterpret_cast<int32_t*>(smem_raw + (addr - device::smem_addr(smem_raw)))),
        w(a + kRows),
        n(reinterpret_cast<float*>(w + kCols)) {}
  // The inputs of the epilogue's head `h` of the tile; `normed`: q or k (v has no norm).
  __device__ __forceinline__ StagedInputs inputs(int h, int head_cols, bool normed) const {
    return StagedInputs{a, w + h * head_cols, normed ? n : nullptr};
  }
};

// Called by the 256 consumer threads (warpgroups 0 and 1, `wg`) once their accumulators are final. `park`: shared
// memory the kernel no longer needs (kParkBytes), used only with kClusterSplit. Every other thread of a split
// kernel must meet the two cluster barriers inside (device::splitk::partials_parked, then partials_read).
// `transposed` (v only: this path applies no norm): the accumulators hold the tile's transpose, rows = the head's
// 128 columns (64 per warpgroup), columns = the 128 token rows (the tf32 kernel's v path, qkv_tf32_splitk_sm90.cuh).
// kStreaming: the row-major stores without a K split evict first (store_group_pair16). `staged`: see StagedInputs
// (without a K split).
template <bool kClusterSplit, bool kUnscale = false, bool kStreaming = false>
__device__ __forceinline__ void store_qkv_tile(float (&acc)[16][4], const QkvGemmParams& p, int which, int head,
                                               int m0, int wg, uint32_t park, bool transposed = false,
                                               const StagedInputs& staged = {}) {
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int n_out = p.heads * QkvTile::kCols;
  const float* norm_w = staged.norm_w != nullptr ? staged.norm_w : (which == 0 ? p.q_norm : p.k_norm);
  float* out = which == 0 ? p.q : (which == 1 ? p.k : p.v);
  out += head * QkvTile::kCols;
  const int g = lane >> 2, t4 = lane & 3;
  // Element e of group j sits at accumulator row wg * 64 + warp * 16 + g + 8 (e / 2), column 8 j + 2 t4 + e % 2.
  const int acc_row0 = wg * 64 + warp * 16 + g;
  // The transposed tile's element (j, e): token row 8 j + 2 t4 + e % 2 of the tile, column acc_row0 + 8 (e / 2).
  const auto transposed_tok = [&](int j, int e) { return 8 * j + 2 * t4 + (e & 1); };
  const auto transposed_col = [&](int e) { return acc_row0 + 8 * (e >> 1); };

  // fp16 operands: this tile's columns' exponents (the weight rows of this head of q, k or v).
  const int32_t* w_exps = kUnscale ? p.w_exps + which * n_out + head * QkvTile::kCols : nullptr;
  if constexpr (!kClusterSplit) {
    if constexpr (kUnscale) {  // (never transposed: the fp16 kernel has no transposed tile)
      if (staged.w_exps != nullptr) w_exps = staged.w_exps;
      const int r0 = m0 + acc_row0;
      const auto row_exp = [&](int h) {
        const int r = r0 + 8 * h;
        return staged.a_exps != nullptr ? staged.a_exps[acc_row0 + 8 * h] : (r < p.m ? p.a_exps[r] : 0);
      };
      const int ra[2] = {row_exp(0), row_exp(1)};
      // One multiply an element where all of the thread's exponents allow it (unscale_fast_ok), else ldexp's steps.
      bool fast = unscale_fast_ok(ra[0]) && unscale_fast_ok(ra[1]);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int2 wc = *reinterpret_cast<const int2*>(w_exps + 8 * j + 2 * t4);
        fast = fast && unscale_fast_ok(wc.x) && unscale_fast_ok(wc.y);
      }
      const auto unscale_all = [&](auto unscale) {
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const int2 wc = *reinterpret_cast<const int2*>(w_exps + 8 * j + 2 * t4);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            acc[j][2 * h] = unscale(acc[j][2 * h], ra[h] + wc.x);
            acc[j][2 * h + 1] = unscale(acc[j][2 * h + 1], ra[h] + wc.y);
          }
        }
      };
      if (fast) {
        unscale_all([](float x, int e) { return unscale_fast(x, e); });
      } else {
        unscale_all([](float x, int e) { return f16::unscale(x, e); });
      }
    }
    if (transposed) {
      // A warp's store of one element covers 8 consecutive columns (32 bytes) of 4 token rows: whole sectors.
#pragma unroll
      for (int j = 0; j < 16; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int tok = m0 + transposed_tok(j, e);
          if (tok < p.m) out[int64_t(tok) * n_out + transposed_col(e)] = acc[j][e];
        }
      }
      return;
    }
    // Thread holds rows r and r+8 of its warp's 16, columns 8j + 2t4 (+1): a row's 128 columns are spread over
    // the 4 threads of a quad.
    const int row_a = m0 + acc_row0;
    float inv[2] = {1.f, 1.f};
    if (which < 2) {
      float ss[2] = {0.f, 0.f};
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        ss[0] += acc[j][0] * acc[j][0] + acc[j][1] * acc[j][1];
        ss[1] += acc[j][2] * acc[j][2] + acc[j][3] * acc[j][3];
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        ss[h] += __shfl_xor_sync(0xffffffffu, ss[h], 1);
        ss[h] += __shfl_xor_sync(0xffffffffu, ss[h], 2);
        inv[h] = head_inv_rms(ss[h], p.eps);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row_a + 8 * h;
      float* o = out + int64_t(row) * n_out;
#pragma unroll
      for (int j0 = 0; j0 < 16; j0 += 2) {
        float2 v[2];
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          const int j = j0 + jj;
          v[jj] = make_float2(acc[j][2 * h], acc[j][2 * h + 1]);
          if (which < 2) {
            const float2 wv = *reinterpret_cast<const float2*>(norm_w + 8 * j + 2 * t4);
            v[jj] = make_float2(v[jj].x * inv[h] * wv.x, v[jj].y * inv[h] * wv.y);
          }
        }
        store_group_pair16<kStreaming>(o + 8 * j0, v[0], v[1], t4, row < p.m);
      }
    }
  } else {
    // Park the partial tile (row-major, padded rows) over the ring, which both consumer warpgroups are done with
    // once they pass the named barrier; a transposed tile is parked in the same layout, so the reduction is one.
    device::named_barrier_sync(1, 256);
    const uint32_t parked = park;
    if (transposed) {
#pragma unroll
      for (int j = 0; j < 16; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int at = transposed_tok(j, e) * QkvTile::kPartialStride + transposed_col(e);
          device::st_shared_b32(parked + at * 4, __float_as_uint(acc[j][e]));
        }
      }
    } else {
      device::splitk::park_rows<QkvTile::kPartialStride>(parked, acc, acc_row0, 0, t4);
    }
    device::splitk::partials_parked();
    // This CTA reduces its share of the rows over the cluster (reduce_store_rows).
    const uint32_t split = gridDim.z, rank = device::cluster_ctarank();
    const float4 wv4 = which < 2 ? reinterpret_cast<const float4*>(norm_w)[lane] : make_float4(1.f, 1.f, 1.f, 1.f);
    if (split == 4) {
      reduce_store_rows<4, kUnscale>(p, which, out, n_out, m0, parked, rank, wv4, w_exps);
    } else {
      reduce_store_rows<2, kUnscale>(p, which, out, n_out, m0, parked, rank, wv4, w_exps);  // split by 2 or 4
    }
    device::splitk::partials_read();
  }
}

}  // namespace gk::audio
