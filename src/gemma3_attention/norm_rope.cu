// Per-head RMSNorm with (offset + w) and RoPE (rotate_half convention), in place on the packed q|k projection
// output. One warp per (token, head); lane l holds dims 4l..4l+3, so the RoPE partner d +/- D/2 of a 128-wide
// head sits in lane l^16. Rounding follows the layer's definition: the normalized head is rounded to bf16, each
// RoPE product is rounded, then their sum.
#include <cuda_bf16.h>

#include "common/cuda_check.hpp"
#include "gemma3_attention/kernels.hpp"

namespace gk::gemma3 {

namespace {

constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

__device__ __forceinline__ void load4(const __nv_bfloat16* p, float (&v)[4]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
  const float2 a = __bfloat1622float2(h[0]);
  const float2 b = __bfloat1622float2(h[1]);
  v[0] = a.x;
  v[1] = a.y;
  v[2] = b.x;
  v[3] = b.y;
}

__global__ void __launch_bounds__(kWarpsPerBlock * 32) norm_rope_d128_kernel(const NormRopeParams p) {
  constexpr int kHeadDim = 128;
  const int heads = p.num_q_heads + p.num_kv_heads;
  const int64_t item = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (item >= p.rows * heads) return;
  const int64_t row = item / heads;
  const int head = static_cast<int>(item % heads);
  const int lane = threadIdx.x % 32;
  const int d0 = lane * 4;

  __nv_bfloat16* x_ptr = p.qkv + row * p.row_stride + head * kHeadDim + d0;
  float x[4], w[4], c[4], s[4];
  load4(x_ptr, x);
  load4((head < p.num_q_heads ? p.q_norm_weight : p.k_norm_weight) + d0, w);
  load4(p.cos + row * kHeadDim + d0, c);
  load4(p.sin + row * kHeadDim + d0, s);

  float ss = x[0] * x[0] + x[1] * x[1] + x[2] * x[2] + x[3] * x[3];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  const float inv_rms = rsqrtf(ss * (1.f / kHeadDim) + p.eps);

  float y[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) y[i] = round_bf16(x[i] * inv_rms * (p.weight_offset + w[i]));

  // rotate_half: dims below D/2 take -x[d + D/2], dims above take x[d - D/2].
  const float sign = lane < 16 ? -1.f : 1.f;
  float out[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float partner = __shfl_xor_sync(0xffffffffu, y[i], 16);
    out[i] = round_bf16(y[i] * c[i]) + round_bf16(sign * partner * s[i]);
  }
  uint2 packed;
  auto* h = reinterpret_cast<__nv_bfloat162*>(&packed);
  h[0] = __floats2bfloat162_rn(out[0], out[1]);
  h[1] = __floats2bfloat162_rn(out[2], out[3]);
  *reinterpret_cast<uint2*>(x_ptr) = packed;
}

}  // namespace

Status launch_norm_rope(const NormRopeParams& p, int head_dim, cudaStream_t stream) {
  if (head_dim != 128) {
    return detail::error(GK_STATUS_NOT_SUPPORTED, "gemma3_attention: no norm/RoPE kernel for head_dim %d", head_dim);
  }
  const int64_t items = p.rows * (p.num_q_heads + p.num_kv_heads);
  const int64_t blocks = (items + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > INT32_MAX) {
    return detail::error(GK_STATUS_INVALID_ARGUMENT, "gemma3_attention: %lld token-heads exceed the norm grid",
                         static_cast<long long>(items));
  }
  norm_rope_d128_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, stream>>>(p);
  return detail::check_launch("gemma3_attention", "norm/RoPE kernel launch");
}

}  // namespace gk::gemma3
