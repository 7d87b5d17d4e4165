// The audio operator's fp16 operands (issue 38; the arithmetic: f16_operands.hpp), made by a pass over whole rows:
// each row of up to four fp32 matrices [rows][k] gets its scale exponent from its largest finite magnitude, then
// every element its fp16 form at that scale - tf32's rounding as fp16 bits (one term, the tf32 mode), or the exact
// mode's two terms (hi, lo). One warp per row, the row held in registers up to 1024 floats (every load in flight at
// once: a sweep per load was latency-bound, docs/perf-log.md v35); longer rows take a second sweep from L1/L2.
// The activations (rows = B*S) and the three weights (rows = output features) in one launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "audio_qkv/f16_operands.hpp"
#include "audio_qkv/params.hpp"
#include "common/device/sm90_primitives.cuh"

namespace gk::audio {

struct F16RowsParams {
  F16Matrix mat[kMaxF16Matrices];  // rows of mat[0], then of mat[1], ...
  int count;
  int k;  // a multiple of 4; every src 16-byte aligned
};

inline constexpr int kF16RowsWarps = 8;
inline constexpr int kF16RowVecsPerLane = 8;  // float4s a lane holds: rows up to 32 * 8 * 4 = 1024 floats

__device__ __forceinline__ float finite_abs_max(float mx, const float4& v) {
  // Only finite magnitudes set the scale: an Inf or NaN element stays what it is (to_f16 keeps it).
  const float in[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (f16::finite(f16::bits_of(in[j]))) mx = fmaxf(mx, fabsf(in[j]));
  }
  return mx;
}

template <bool kTwoTerms>
__device__ __forceinline__ void store_f16_vec(const float4& v, int e, uint2* hi, uint2* lo, int i) {
  const float in[4] = {v.x, v.y, v.z, v.w};
  uint16_t h[4], l[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if constexpr (kTwoTerms) {
      const f16::Split s = f16::split(in[j], e);
      h[j] = s.hi;
      l[j] = s.lo;
    } else {
      h[j] = f16::tf32_as_f16(in[j], e);
      l[j] = 0;
    }
  }
  hi[i] = make_uint2(h[0] | (uint32_t(h[1]) << 16), h[2] | (uint32_t(h[3]) << 16));
  if constexpr (kTwoTerms) lo[i] = make_uint2(l[0] | (uint32_t(l[1]) << 16), l[2] | (uint32_t(l[3]) << 16));
}

template <bool kTwoTerms>
__global__ void __launch_bounds__(kF16RowsWarps * 32) f16_rows_kernel(const __grid_constant__ F16RowsParams p) {
  // The GEMM that reads the operands may launch as a programmatic dependent: let its CTAs be scheduled (they wait
  // for this grid's completion before reading).
  device::launch_dependents();
  int64_t row = int64_t(blockIdx.x) * kF16RowsWarps + threadIdx.x / 32;
  F16Matrix m{};
  bool found = false;
#pragma unroll
  for (int i = 0; i < kMaxF16Matrices; ++i) {  // unrolled: no dynamic index into the parameters
    if (!found && i < p.count) {
      if (row < p.mat[i].rows) {
        m = p.mat[i];
        found = true;
      } else {
        row -= p.mat[i].rows;
      }
    }
  }
  if (!found) return;
  const int lane = threadIdx.x % 32, vecs = p.k / 4;
  const float4* x = reinterpret_cast<const float4*>(m.src + row * p.k);
  uint2* hi = reinterpret_cast<uint2*>(m.hi + row * p.k);
  uint2* lo = kTwoTerms ? reinterpret_cast<uint2*>(m.lo + row * p.k) : nullptr;
  float mx = 0.f;
  if (vecs <= 32 * kF16RowVecsPerLane) {
    float4 v[kF16RowVecsPerLane];
#pragma unroll
    for (int j = 0; j < kF16RowVecsPerLane; ++j) {
      const int i = lane + 32 * j;
      v[j] = i < vecs ? __ldg(x + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int j = 0; j < kF16RowVecsPerLane; ++j) mx = finite_abs_max(mx, v[j]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    const int e = f16::scale_exponent(mx);
    if (lane == 0) m.exps[row] = e;
#pragma unroll
    for (int j = 0; j < kF16RowVecsPerLane; ++j) {
      const int i = lane + 32 * j;
      if (i < vecs) store_f16_vec<kTwoTerms>(v[j], e, hi, lo, i);
    }
    return;
  }
  for (int i = lane; i < vecs; i += 32) mx = finite_abs_max(mx, x[i]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  const int e = f16::scale_exponent(mx);
  if (lane == 0) m.exps[row] = e;
  for (int i = lane; i < vecs; i += 32) store_f16_vec<kTwoTerms>(x[i], e, hi, lo, i);
}

}  // namespace gk::audio
