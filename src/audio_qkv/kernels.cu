// Elementwise kernels of the audio QKV operator: round-to-nearest tf32 staging for the tensor-core GEMM path,
// and the per-head RMSNorm (weight offset 0) applied in place to q and k.
#include <algorithm>

#include "audio_qkv/kernels.hpp"
#include "common/cuda_check.hpp"

namespace gk::audio {

namespace {

constexpr const char* kOp = "audio_qkv";

__device__ __forceinline__ float to_tf32_rna(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

__global__ void round_tf32_kernel(const float4* __restrict__ src, float4* __restrict__ dst, int64_t n4) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += int64_t(gridDim.x) * blockDim.x) {
    float4 v = src[i];
    v.x = to_tf32_rna(v.x);
    v.y = to_tf32_rna(v.y);
    v.z = to_tf32_rna(v.z);
    v.w = to_tf32_rna(v.w);
    dst[i] = v;
  }
}

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

Status launch_round_tf32(const float* src, float* dst, int64_t n, cudaStream_t stream) {
  const int64_t n4 = n / 4;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n4 + threads - 1) / threads, 132 * 16);
  round_tf32_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(reinterpret_cast<const float4*>(src),
                                                                           reinterpret_cast<float4*>(dst), n4);
  return detail::check_launch(kOp, "tf32 rounding kernel launch");
}

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
