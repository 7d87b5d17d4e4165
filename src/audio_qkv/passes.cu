// Memory-bound kernels of the audio QKV operator: the per-head RMSNorm (weight offset 0) of the cuBLASLt path,
// applied in place to q or k, and the passes that prepare operands for the fused GEMMs (the tf32-rounded weights
// the persistent kernel reads, the rounded activations of the split-K kernel, the activations' tf32 parts for
// 3xTF32).
#include <algorithm>

#include "audio_qkv/f16_rows.cuh"
#include "audio_qkv/launchers.hpp"
#include "common/cuda_check.hpp"
#include "common/device_props.hpp"
#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"

namespace gk::audio {

namespace {

constexpr const char* kOp = "audio_qkv";

constexpr int kWarpsPerBlock = 8;

constexpr int kNormHeadDim = 128;  // the norm kernel's head: a warp of 32 lanes x 4 floats

// One warp per (row, head) of a 128-wide head; lane l holds dims 4l..4l+3.
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    head_rmsnorm_d128_kernel(float* __restrict__ x, const float* __restrict__ w, int64_t rows, int heads, float eps) {
  constexpr int kHeadDim = kNormHeadDim;
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

// Elementwise passes that prepare fp32 operands for the fused GEMMs' tensor cores, over float4s: blockIdx.y picks
// one of up to three tensors (no index division) and `Op` writes Op::kParts outputs per input, part p of tensor y's
// element i at dst[(y * kParts + p) * vec + i]. kPassPer 16-byte loads per thread go out before any store: one load
// per thread and step kept too few bytes in flight (docs/perf-log.md).
constexpr int kPassThreads = 256, kPassPer = 4;
constexpr int64_t kPassSpan = int64_t(kPassThreads) * kPassPer;  // float4s a block covers per step

template <class Op>
__global__ void __launch_bounds__(kPassThreads)
    float4_pass_kernel(const float4* __restrict__ s0, const float4* __restrict__ s1, const float4* __restrict__ s2,
                       float4* __restrict__ dst, int64_t vec) {
  // The GEMM that reads dst is launched as a programmatic dependent: let it be scheduled (its CTAs start as SMs
  // free up and wait for this grid's completion before reading dst).
  device::launch_dependents();
  const float4* __restrict__ src = blockIdx.y == 0 ? s0 : (blockIdx.y == 1 ? s1 : s2);
  float4* __restrict__ out = dst + int64_t(blockIdx.y) * Op::kParts * vec;
  for (int64_t base = int64_t(blockIdx.x) * kPassSpan + threadIdx.x; base < vec;
       base += int64_t(gridDim.x) * kPassSpan) {
    float4 v[kPassPer];
#pragma unroll
    for (int j = 0; j < kPassPer; ++j) {
      const int64_t i = base + j * kPassThreads;
      v[j] = i < vec ? __ldg(src + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int j = 0; j < kPassPer; ++j) {
      const int64_t i = base + j * kPassThreads;
      if (i < vec) Op::store(out, vec, i, v[j]);
    }
  }
}

// Rounded to tf32 as the tensor cores see it (device::round_tf32_for_mma).
struct RoundTf32 {
  static constexpr int kParts = 1;
  __device__ static void store(float4* out, int64_t, int64_t i, const float4& v) {
    reinterpret_cast<uint4*>(out)[i] = device::round_tf32_for_mma(reinterpret_cast<const uint4&>(v));
  }
};

// The 3xTF32 parts, big then small (device::round_tf32 and device::tf32_small_part: the values the kernel's own
// part warps make).
struct Tf32x3Parts {
  static constexpr int kParts = 2;
  __device__ static void store(float4* out, int64_t vec, int64_t i, const float4& v) {
    const float4 b =
        make_float4(device::round_tf32(v.x), device::round_tf32(v.y), device::round_tf32(v.z), device::round_tf32(v.w));
    out[i] = b;
    out[vec + i] = make_float4(device::tf32_small_part(v.x, b.x), device::tf32_small_part(v.y, b.y),
                               device::tf32_small_part(v.z, b.z), device::tf32_small_part(v.w, b.w));
  }
};

template <class Op>
Status prepare_float4_pass(const char* what, const float* const* src, int count, float* dst, int64_t elems_each,
                           int sms, detail::KernelLaunch* out) {
  if (elems_each % 4 != 0 || count < 1 || count > 3) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: %s of %d x %lld elements (whole float4s, 1-3 tensors)", kOp,
                         what, count, static_cast<long long>(elems_each));
  }
  const int64_t vec = elems_each / 4;
  // Per tensor; the tensors' blocks together stay within ~8 per SM, grid-stride beyond.
  const int64_t blocks =
      std::max<int64_t>(1, std::min<int64_t>((vec + kPassSpan - 1) / kPassSpan, int64_t(sms) * 8 / count));
  const auto v = [&](int i) { return reinterpret_cast<const float4*>(src[i < count ? i : 0]); };
  *out = detail::KernelLaunch(what, float4_pass_kernel<Op>,
                              {dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(count)), kPassThreads}, v(0),
                              v(1), v(2), reinterpret_cast<float4*>(dst), vec);
  return Status::Ok();
}

}  // namespace

Status prepare_round_tf32(const float* const* src, int count, float* dst, int64_t elems_each, int sms,
                          detail::KernelLaunch* out) {
  return prepare_float4_pass<RoundTf32>("tf32 rounding launch", src, count, dst, elems_each, sms, out);
}

Status prepare_tf32x3_parts(const float* src, float* dst, int64_t elems, int sms, detail::KernelLaunch* out) {
  return prepare_float4_pass<Tf32x3Parts>("3xTF32 parts launch", &src, 1, dst, elems, sms, out);
}

Status prepare_f16_rows(const F16Matrix* mats, int count, int k, detail::KernelLaunch* out) {
  F16RowsParams p{};
  int64_t rows = 0;
  bool two_terms = count > 0 && mats[0].lo != nullptr, ok = count >= 1 && count <= kMaxF16Matrices && k % 4 == 0;
  for (int i = 0; ok && i < count; ++i) {
    p.mat[i] = mats[i];
    rows += mats[i].rows;
    ok = mats[i].rows >= 0 && (mats[i].lo != nullptr) == two_terms;
  }
  const int64_t blocks = (rows + kF16RowsWarps - 1) / kF16RowsWarps;
  if (!ok || blocks < 1 || blocks > INT32_MAX) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: an fp16 operand pass the kernel cannot take", kOp);
  }
  p.count = count;
  p.k = k;
  const detail::LaunchShape shape{dim3(static_cast<unsigned>(blocks)), kF16RowsWarps * 32};
  *out = two_terms ? detail::KernelLaunch("fp16 operand pass launch", f16_rows_kernel<true>, shape, p)
                   : detail::KernelLaunch("fp16 operand pass launch", f16_rows_kernel<false>, shape, p);
  return Status::Ok();
}

Status launch_head_rmsnorm(float* x, const float* w, int64_t rows, int heads, int head_dim, float eps,
                           cudaStream_t stream) {
  if (head_dim != kNormHeadDim) {
    return detail::error(GK_STATUS_NOT_SUPPORTED, "%s: no RMSNorm kernel for head_dim %d", kOp, head_dim);
  }
  const int64_t blocks = (rows * heads + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > INT32_MAX) {
    return detail::error(GK_STATUS_INVALID_ARGUMENT, "%s: %lld token-heads exceed the norm grid", kOp,
                         static_cast<long long>(rows * heads));
  }
  return detail::launch_now(kOp, "RMSNorm kernel launch", head_rmsnorm_d128_kernel,
                            {dim3(static_cast<unsigned>(blocks)), kWarpsPerBlock * 32}, stream, x, w, rows, heads, eps);
}

}  // namespace gk::audio
