#include <cstring>

#include "device_buffer.hpp"
#include "judge.hpp"

namespace gk_testkit {

namespace {

struct Accum {
  unsigned long long matched, non_finite, nonzero;
  unsigned int max_err_bits;  // non-negative float as ordered bits
  double err_sq, ref_sq;
};

__device__ double to_double(__nv_bfloat16 x) { return double(__bfloat162float(x)); }
__device__ double to_double(float x) { return double(x); }
__device__ double to_double(double x) { return x; }

template <typename Out, typename Ref>
__global__ void judge_kernel(const Out* out, const Ref* ref, int64_t n, double atol, double rtol, Accum* acc) {
  unsigned long long matched = 0, non_finite = 0, nonzero = 0;
  float max_err = 0.f;
  double err_sq = 0.0, ref_sq = 0.0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const double o = to_double(out[i]), r = to_double(ref[i]);
    if (!isfinite(o)) {
      ++non_finite;
      continue;
    }
    nonzero += o != 0.0;
    const double err = fabs(o - r);
    matched += err <= atol + rtol * fabs(r);
    if (isfinite(err)) {
      max_err = fmaxf(max_err, float(err));
      err_sq += err * err;
      ref_sq += r * r;
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
    matched += __shfl_xor_sync(0xffffffffu, matched, off);
    non_finite += __shfl_xor_sync(0xffffffffu, non_finite, off);
    nonzero += __shfl_xor_sync(0xffffffffu, nonzero, off);
    max_err = fmaxf(max_err, __shfl_xor_sync(0xffffffffu, max_err, off));
    err_sq += __shfl_xor_sync(0xffffffffu, err_sq, off);
    ref_sq += __shfl_xor_sync(0xffffffffu, ref_sq, off);
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&acc->matched, matched);
    atomicAdd(&acc->non_finite, non_finite);
    atomicAdd(&acc->nonzero, nonzero);
    atomicMax(&acc->max_err_bits, __float_as_uint(max_err));
    atomicAdd(&acc->err_sq, err_sq);
    atomicAdd(&acc->ref_sq, ref_sq);
  }
}

template <typename Out, typename Ref>
Judgement run(const Out* out, const Ref* ref, int64_t n, double atol, double rtol, cudaStream_t stream) {
  DeviceBuffer acc(sizeof(Accum));
  GK_TK_CUDA(cudaMemsetAsync(acc.get(), 0, sizeof(Accum), stream));
  judge_kernel<<<132 * 8, 256, 0, stream>>>(out, ref, n, atol, rtol, acc.as<Accum>());
  GK_TK_CUDA(cudaGetLastError());
  Accum h{};
  GK_TK_CUDA(cudaMemcpyAsync(&h, acc.get(), sizeof(Accum), cudaMemcpyDeviceToHost, stream));
  GK_TK_CUDA(cudaStreamSynchronize(stream));
  Judgement j;
  j.count = n;
  j.matched = static_cast<int64_t>(h.matched);
  j.non_finite = static_cast<int64_t>(h.non_finite);
  j.nonzero = static_cast<int64_t>(h.nonzero);
  float max_err = 0.f;
  std::memcpy(&max_err, &h.max_err_bits, sizeof(max_err));
  j.max_abs_err = double(max_err);
  j.err_sq = h.err_sq;
  j.ref_sq = h.ref_sq;
  return j;
}

}  // namespace

Judgement judge_device(const __nv_bfloat16* out, const __nv_bfloat16* ref, int64_t n, double atol, double rtol,
                       cudaStream_t stream) {
  return run(out, ref, n, atol, rtol, stream);
}

Judgement judge_device(const float* out, const double* ref, int64_t n, double atol, double rtol,
                       cudaStream_t stream) {
  return run(out, ref, n, atol, rtol, stream);
}

}  // namespace gk_testkit
