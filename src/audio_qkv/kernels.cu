// The per-head RMSNorm (weight offset 0) of the audio QKV operator's cuBLASLt path, applied in place to q or k.
#include <algorithm>

#include "audio_qkv/kernels.hpp"
#include "common/cuda_check.hpp"

namespace gk::audio {

namespace {

constexpr const char* kOp = "audio_qkv";

constexpr int kWarpsPerBlock = 8;

// One warp per (row, head) of a 128-wide head; lane l holds dims 4l..4l+3.
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    head_rmsnorm_d128_kernel(float* __restrict__ x, const float* __restrict__ w, int64_t rows, int heads, float eps) {
  constexpr int kHeadDim = 128;
  const int64_t item = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (item >= rows * heads) return;
  const int lane = threadIdx.x % 32;
  float4* p = reinterpret_cast<float4*>(x + item * kHeadDim) + lane;
  const float4 v = *p;
  const float4 g = reinterpret_cast<const float4*>(w)[lane];
  float ss = v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  // IEEE sqrt and division, as the operator's definition divides by sqrt(mean + eps).
  const float denom = __fsqrt_rn(ss * (1.f / kHeadDim) + eps);
  *p = make_float4(__fdiv_rn(v.x, denom) * g.x, __fdiv_rn(v.y, denom) * g.y, __fdiv_rn(v.z, denom) * g.z,
                   __fdiv_rn(v.w, denom) * g.w);
}

}  // namespace

Status launch_head_rmsnorm(float* x, const float* w, int64_t rows, int heads, int head_dim, float eps,
                           cudaStream_t stream) {
  if (head_dim != 128) {
    return detail::error(GK_STATUS_NOT_SUPPORTED, "%s: no RMSNorm kernel for head_dim %d", kOp, head_dim);
  }
  const int64_t blocks = (rows * heads + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > INT32_MAX) {
    return detail::error(GK_STATUS_INVALID_ARGUMENT, "%s: %lld token-heads exceed the norm grid", kOp,
                         static_cast<long long>(rows * heads));
  }
  head_rmsnorm_d128_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, stream>>>(x, w, rows, heads,
                                                                                              eps);
  return detail::check_launch(kOp, "RMSNorm kernel launch");
}

}  // namespace gk::audio
