// The audio operator's fp16 operands (issue 38; the arithmetic: f16_operands.hpp), made by a pass over whole rows:
// each row of up to three fp32 matrices [rows][k] gets its scale exponent from its largest finite magnitude, then
// every element its fp16 form at that scale - tf32's rounding as fp16 bits (one term, the tf32 mode), or the exact
// mode's two terms (hi, lo). One warp per row: a first sweep for the maximum, a second (the row again, from L1/L2)
// for the conversion. Activations (one matrix, rows = B*S) and the three weights (rows = output features) alike.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "audio_qkv/f16_operands.hpp"
#include "common/device/sm90_primitives.cuh"

namespace gk::audio {

struct F16RowsParams {
  const float* src[3];  // up to three matrices of `rows` x `k` floats, rows contiguous (k floats apart)
  int count;            // how many
  int64_t rows;         // rows of each
  int k;                // a multiple of 4; src 16-byte aligned
  uint16_t* hi;         // [count * rows][k]: the one term (or the exact mode's hi term), fp16 bits
  uint16_t* lo;         // the exact mode's lo term, same layout; null for one term
  int32_t* exps;        // [count * rows]: each row's scale exponent (f16::scale_exponent)
};

inline constexpr int kF16RowsWarps = 8;

template <bool kTwoTerms>
__global__ void __launch_bounds__(kF16RowsWarps * 32) f16_rows_kernel(const F16RowsParams p) {
  // The GEMM that reads the operands may launch as a programmatic dependent: let its CTAs be scheduled (they wait
  // for this grid's completion before reading).
  device::launch_dependents();
  const int64_t row = int64_t(blockIdx.x) * kF16RowsWarps + threadIdx.x / 32;
  if (row >= p.count * p.rows) return;
  const int lane = threadIdx.x % 32, m = static_cast<int>(row / p.rows);
  const float* src = m == 0 ? p.src[0] : (m == 1 ? p.src[1] : p.src[2]);
  const float4* x = reinterpret_cast<const float4*>(src + (row - m * p.rows) * p.k);
  const int vecs = p.k / 4;
  float mx = 0.f;
  for (int i = lane; i < vecs; i += 32) {
    const float4 v = x[i];
    const float in[4] = {v.x, v.y, v.z, v.w};
    // Only finite magnitudes set the scale: an Inf or NaN element stays what it is (to_f16 keeps it).
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (f16::finite(f16::bits_of(in[j]))) mx = fmaxf(mx, fabsf(in[j]));
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  const int e = f16::scale_exponent(mx);
  if (lane == 0) p.exps[row] = e;
  uint2* hi = reinterpret_cast<uint2*>(p.hi + row * p.k);
  uint2* lo = kTwoTerms ? reinterpret_cast<uint2*>(p.lo + row * p.k) : nullptr;
  for (int i = lane; i < vecs; i += 32) {
    const float4 v = x[i];
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
      }
    }
    hi[i] = make_uint2(h[0] | (uint32_t(h[1]) << 16), h[2] | (uint32_t(h[3]) << 16));
    if constexpr (kTwoTerms) lo[i] = make_uint2(l[0] | (uint32_t(l[1]) << 16), l[2] | (uint32_t(l[3]) << 16));
  }
}

}  // namespace gk::audio
