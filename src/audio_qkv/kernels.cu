// Memory-bound kernels of the audio QKV operator: the per-head RMSNorm (weight offset 0) of the cuBLASLt path,
// applied in place to q or k, and the round-to-nearest tf32 copy of the three weights that the persistent tf32
// GEMM reads.
#include <algorithm>

#include "audio_qkv/kernels.hpp"
#include "common/cuda_check.hpp"
#include "common/device_props.hpp"
#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"

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

// dst[w][i] = round_tf32_for_mma(src_w[i]) for up to three tensors (blockIdx.y picks one, so no index division), kPer
// 16-byte loads per thread issued before any store: one load per thread and step kept too few bytes in flight and
// ran at ~3 TB/s (8.5 us for 12.6 MB of weights).
constexpr int kRoundThreads = 256, kRoundPer = 4;
constexpr int64_t kRoundSpan = int64_t(kRoundThreads) * kRoundPer;  // float4s a block covers per step

__global__ void __launch_bounds__(kRoundThreads)
    round_tf32_kernel(const float4* __restrict__ w0, const float4* __restrict__ w1,
                              const float4* __restrict__ w2, float4* __restrict__ dst, int64_t vec_each) {
  // The GEMM that reads dst is launched as a programmatic dependent: let it be scheduled (its CTAs start as SMs
  // free up and wait for this grid's completion before reading dst).
  device::launch_dependents();
  const float4* __restrict__ src = blockIdx.y == 0 ? w0 : (blockIdx.y == 1 ? w1 : w2);
  float4* __restrict__ out = dst + int64_t(blockIdx.y) * vec_each;
  for (int64_t base = int64_t(blockIdx.x) * kRoundSpan + threadIdx.x; base < vec_each;
       base += int64_t(gridDim.x) * kRoundSpan) {
    float4 v[kRoundPer];
#pragma unroll
    for (int j = 0; j < kRoundPer; ++j) {
      const int64_t i = base + j * kRoundThreads;
      v[j] = i < vec_each ? __ldg(src + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int j = 0; j < kRoundPer; ++j) {
      const int64_t i = base + j * kRoundThreads;
      if (i < vec_each) {
        const uint4 u = reinterpret_cast<const uint4&>(v[j]);
        reinterpret_cast<uint4*>(out)[i] =
            make_uint4(device::round_tf32_for_mma(u.x), device::round_tf32_for_mma(u.y),
                       device::round_tf32_for_mma(u.z), device::round_tf32_for_mma(u.w));
      }
    }
  }
}

// dst[i] = big, dst[vec + i] = small (float4 units) of the 3xTF32 split of src[i] (device::round_tf32 and
// device::tf32_small_part: the same values the kernel's own split gives), kRoundPer loads in flight per thread.
__global__ void __launch_bounds__(kRoundThreads)
    split_tf32_kernel(const float4* __restrict__ src, float4* __restrict__ dst, int64_t vec) {
  device::launch_dependents();  // the 3xTF32 kernel reading dst is a programmatic dependent
  for (int64_t base = int64_t(blockIdx.x) * kRoundSpan + threadIdx.x; base < vec;
       base += int64_t(gridDim.x) * kRoundSpan) {
    float4 v[kRoundPer];
#pragma unroll
    for (int j = 0; j < kRoundPer; ++j) {
      const int64_t i = base + j * kRoundThreads;
      v[j] = i < vec ? __ldg(src + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int j = 0; j < kRoundPer; ++j) {
      const int64_t i = base + j * kRoundThreads;
      if (i >= vec) continue;
      const float4 b = make_float4(device::round_tf32(v[j].x), device::round_tf32(v[j].y), device::round_tf32(v[j].z),
                                   device::round_tf32(v[j].w));
      dst[i] = b;
      dst[vec + i] = make_float4(device::tf32_small_part(v[j].x, b.x), device::tf32_small_part(v[j].y, b.y),
                                 device::tf32_small_part(v[j].z, b.z), device::tf32_small_part(v[j].w, b.w));
    }
  }
}

}  // namespace

Status launch_round_tf32(const float* const* src, int count, float* dst, int64_t elems_each, cudaStream_t stream) {
  if (elems_each % 4 != 0 || count < 1 || count > 3) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: tf32 rounding of %d x %lld elements (whole float4s, 1-3 "
                         "tensors)", kOp, count, static_cast<long long>(elems_each));
  }
  int sms = 0;
  GK_RETURN_IF_ERROR(detail::sm_count(kOp, &sms));
  const int64_t vec = elems_each / 4;
  // Per tensor; the tensors' blocks together stay within ~8 per SM, grid-stride beyond.
  const int64_t blocks =
      std::max<int64_t>(1, std::min<int64_t>((vec + kRoundSpan - 1) / kRoundSpan, int64_t(sms) * 8 / count));
  const auto v = [&](int i) { return reinterpret_cast<const float4*>(src[i < count ? i : 0]); };
  round_tf32_kernel<<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(count)), kRoundThreads, 0,
                              stream>>>(v(0), v(1), v(2), reinterpret_cast<float4*>(dst), vec);
  return detail::check_launch(kOp, "tf32 rounding launch");
}

Status launch_split_tf32(const float* src, float* dst, int64_t elems, cudaStream_t stream) {
  if (elems % 4 != 0) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: 3xTF32 split of %lld elements (whole float4s)", kOp,
                         static_cast<long long>(elems));
  }
  int sms = 0;
  GK_RETURN_IF_ERROR(detail::sm_count(kOp, &sms));
  const int64_t vec = elems / 4;
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((vec + kRoundSpan - 1) / kRoundSpan, int64_t(sms) * 8));
  split_tf32_kernel<<<static_cast<unsigned>(blocks), kRoundThreads, 0, stream>>>(
      reinterpret_cast<const float4*>(src), reinterpret_cast<float4*>(dst), vec);
  return detail::check_launch(kOp, "3xTF32 split launch");
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
