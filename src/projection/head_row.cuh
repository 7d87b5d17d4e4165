// The end of a projection's head-row, shared by the projection kernels whose epilogue holds one head-row per warp:
// lane l holds kCols consecutive fp32 columns (kCols * l ...) of one token's head, kCols = head_dim / 32, so the
// RoPE partner d +/- head_dim/2 sits in lane l ^ 16. The row is rounded to bf16 as a separate projection would store
// it; a normed head then gets RMSNorm with (offset + w) and RoPE with the roundings of the standalone pass
// (norm_rope.cu's finish says why the bf16-pair RoPE is bit-identical to rounding each fp32 product and the sum).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "common/device/sm80_primitives.cuh"

namespace gk::gemma3 {

// A token's RoPE tables at the lane's columns, bf16 pairs.
template <int kCols>
struct RopeRow {
  uint32_t cos[kCols / 2];
  uint32_t sin[kCols / 2];
};

// The lane's (offset + w) factors (the offset alone where `norm_weight` is null: the head is not normed).
template <int kCols>
__device__ __forceinline__ void load_norm_factors(const __nv_bfloat16* norm_weight, float offset, int lane,
                                                  float (&w)[kCols]) {
#pragma unroll
  for (int c = 0; c < kCols; c += 2) {
    const float2 v = norm_weight != nullptr
                         ? device::unpack_bf16x2(*reinterpret_cast<const uint32_t*>(norm_weight + kCols * lane + c))
                         : make_float2(0.f, 0.f);
    w[c] = offset + v.x;
    w[c + 1] = offset + v.y;
  }
}

// The token's cos/sin at the lane's columns ([rows, head_dim] tables); zeros where `load` is false.
template <int kCols>
__device__ __forceinline__ RopeRow<kCols> load_rope(const __nv_bfloat16* cos, const __nv_bfloat16* sin, int64_t row,
                                                   int lane, bool load) {
  RopeRow<kCols> r;
  const int64_t at = row * (32 * kCols) + kCols * lane;
#pragma unroll
  for (int c = 0; c < kCols / 2; ++c) {
    r.cos[c] = load ? *reinterpret_cast<const uint32_t*>(cos + at + 2 * c) : 0u;
    r.sin[c] = load ? *reinterpret_cast<const uint32_t*>(sin + at + 2 * c) : 0u;
  }
  return r;
}

// x: the lane's fp32 sums; out: the lane's bf16 results as pairs. Full warp when `normed` (uniform per warp).
template <int kCols>
__device__ __forceinline__ void finish_head_row(const float (&x)[kCols], bool normed, const float (&w)[kCols],
                                                const RopeRow<kCols>& rope, float eps, int lane,
                                                uint32_t (&out)[kCols / 2]) {
#pragma unroll
  for (int c = 0; c < kCols / 2; ++c) out[c] = device::pack_bf16x2(x[2 * c], x[2 * c + 1]);
  if (!normed) return;
  float r[kCols];
#pragma unroll
  for (int c = 0; c < kCols / 2; ++c) {
    const float2 v = device::unpack_bf16x2(out[c]);
    r[2 * c] = v.x;
    r[2 * c + 1] = v.y;
  }
  float ss = 0.f;
#pragma unroll
  for (int c = 0; c < kCols; ++c) ss += r[c] * r[c];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  const float inv_rms = rsqrtf(ss * (1.f / (32 * kCols)) + eps);
  // rotate_half: columns below head_dim/2 take -x[d + head_dim/2], columns above take x[d - head_dim/2].
  const uint32_t sin_sign = lane < 16 ? 0x80008000u : 0u;  // flips both bf16 signs
#pragma unroll
  for (int c = 0; c < kCols / 2; ++c) {
    const uint32_t y = device::pack_bf16x2(r[2 * c] * inv_rms * w[2 * c], r[2 * c + 1] * inv_rms * w[2 * c + 1]);
    const uint32_t partner = __shfl_xor_sync(0xffffffffu, y, 16);
    out[c] = device::rope_bf16x2(y, partner, rope.cos[c], sin_sign ^ rope.sin[c]);
  }
}

}  // namespace gk::gemma3
