// Audio QKV projection in double on the GPU: the fp64 truth for full-size checks.
#include "reference_gpu.hpp"

namespace gk_ref_gpu {

namespace {

// One thread per (row, head): x / sqrt(mean(x^2) + eps) * w, in double.
__global__ void rmsnorm_kernel(double* x, const float* w, int64_t items, int64_t D, float eps) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= items) return;
  double* p = x + idx * D;
  double ss = 0.0;
  for (int64_t i = 0; i < D; ++i) ss += p[i] * p[i];
  const double denom = sqrt(ss / double(D) + double(eps));
  for (int64_t i = 0; i < D; ++i) p[i] = p[i] / denom * double(w[i]);
}

}  // namespace

cudaError_t audio_qkv(const gk_ref::AudioDims& d, const float* hs, const float* wq, const float* wk, const float* wv,
                      const float* q_norm_w, const float* k_norm_w, double* query, double* key, double* value,
                      cudaStream_t stream) {
  const int64_t rows = d.batch * d.seq_len, n = d.num_heads * d.head_dim;
  cudaError_t err = linear_f64(hs, wq, query, rows, d.hidden, n, stream);
  if (err == cudaSuccess) err = linear_f64(hs, wk, key, rows, d.hidden, n, stream);
  if (err == cudaSuccess) err = linear_f64(hs, wv, value, rows, d.hidden, n, stream);
  const int64_t items = rows * d.num_heads;
  const unsigned blocks = static_cast<unsigned>((items + 127) / 128);
  if (err == cudaSuccess) {
    rmsnorm_kernel<<<blocks, 128, 0, stream>>>(query, q_norm_w, items, d.head_dim, d.eps);
    rmsnorm_kernel<<<blocks, 128, 0, stream>>>(key, k_norm_w, items, d.head_dim, d.eps);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  return err;
}

}  // namespace gk_ref_gpu
