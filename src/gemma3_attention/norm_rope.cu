// Per-head RMSNorm with (offset + w) and RoPE (rotate_half convention), in place on the packed q|k projection
// output. One warp per (token, 4 heads): a half-warp per head, lane l of it holding dims 8l..8l+7 (16 bytes), so
// the RoPE partner d +/- D/2 of a 128-wide head sits in lane l^8, and the token's cos/sin are loaded once for the
// warp's heads. Two heads per half-warp keep 32 bytes of each lane's loads in flight: the kernel is a pure stream
// (read q|k once, write once) and one 8-byte load per lane reached only half the memory bandwidth (measured).
// Rounding follows the layer's definition: the normalized head is rounded to bf16, each RoPE product is rounded,
// then their sum.
#include <cuda_bf16.h>

#include "common/cuda_check.hpp"
#include "common/device/sm80_primitives.cuh"
#include "gemma3_attention/kernels.hpp"

namespace gk::gemma3 {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kHeadsPerWarp = 4;

using device::round_bf16;

__device__ __forceinline__ void load8(const __nv_bfloat16* p, float (&v)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}

__global__ void __launch_bounds__(kWarpsPerBlock * 32) norm_rope_d128_kernel(const NormRopeParams p) {
  constexpr int kHeadDim = 128;
  constexpr int kPasses = kHeadsPerWarp / 2;
  const int heads = p.num_q_heads + p.num_kv_heads;
  const int groups = (heads + kHeadsPerWarp - 1) / kHeadsPerWarp;
  const int64_t item = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (item >= p.rows * groups) return;  // whole warps leave together: the shuffles below stay full-warp
  const int64_t row = item / groups;
  const int head0 = static_cast<int>(item % groups) * kHeadsPerWarp;
  const int lane = threadIdx.x % 32;
  const int half = lane / 16, hl = lane % 16;
  const int d0 = hl * 8;

  float c[8], s[8];
  load8(p.cos + row * kHeadDim + d0, c);
  load8(p.sin + row * kHeadDim + d0, s);
  float x[kPasses][8], w[kPasses][8];
  __nv_bfloat16* x_ptr[kPasses];
  bool live[kPasses];
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const int head = head0 + 2 * i + half;
    live[i] = head < heads;
    x_ptr[i] = p.qkv + row * p.row_stride + head * kHeadDim + d0;
    if (live[i]) {
      load8(x_ptr[i], x[i]);
      load8((head < p.num_q_heads ? p.q_norm_weight : p.k_norm_weight) + d0, w[i]);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) x[i][e] = w[i][e] = 0.f;
    }
  }

  // rotate_half: dims below D/2 take -x[d + D/2], dims above take x[d - D/2].
  const float sign = hl < 8 ? -1.f : 1.f;
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    float ss = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) ss += x[i][e] * x[i][e];
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);  // within the half-warp
    const float inv_rms = rsqrtf(ss * (1.f / kHeadDim) + p.eps);
    float y[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) y[e] = round_bf16(x[i][e] * inv_rms * (p.weight_offset + w[i][e]));
    uint4 packed;
    auto* h = reinterpret_cast<__nv_bfloat162*>(&packed);
#pragma unroll
    for (int e = 0; e < 8; e += 2) {
      const float p0 = __shfl_xor_sync(0xffffffffu, y[e], 8);
      const float p1 = __shfl_xor_sync(0xffffffffu, y[e + 1], 8);
      h[e / 2] = __floats2bfloat162_rn(round_bf16(y[e] * c[e]) + round_bf16(sign * p0 * s[e]),
                                       round_bf16(y[e + 1] * c[e + 1]) + round_bf16(sign * p1 * s[e + 1]));
    }
    if (live[i]) *reinterpret_cast<uint4*>(x_ptr[i]) = packed;
  }
}

}  // namespace

Status launch_norm_rope(const NormRopeParams& p, int head_dim, cudaStream_t stream) {
  if (head_dim != 128) {
    return detail::error(GK_STATUS_NOT_SUPPORTED, "gemma3_attention: no norm/RoPE kernel for head_dim %d", head_dim);
  }
  const int64_t items = p.rows * ((p.num_q_heads + p.num_kv_heads + kHeadsPerWarp - 1) / kHeadsPerWarp);
  const int64_t blocks = (items + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > INT32_MAX) {
    return detail::error(GK_STATUS_INVALID_ARGUMENT, "gemma3_attention: %lld token-heads exceed the norm grid",
                         static_cast<long long>(items));
  }
  norm_rope_d128_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, stream>>>(p);
  return detail::check_launch("gemma3_attention", "norm/RoPE kernel launch");
}

}  // namespace gk::gemma3
