// Shared-memory tiled GEMMs, one output per thread: simple enough to be obviously right, fast enough for
// full-size problems.
#include "reference_gpu.hpp"

namespace gk_ref_gpu {

namespace {

constexpr int kTile = 16;

template <typename In, typename Acc, typename Out>
__global__ void linear_kernel(const In* x, const In* w, Out* y, int64_t rows, int64_t in, int64_t out) {
  __shared__ Acc xs[kTile][kTile + 1];
  __shared__ Acc ws[kTile][kTile + 1];
  const int64_t m = int64_t(blockIdx.x) * kTile + threadIdx.y;
  const int64_t n = int64_t(blockIdx.y) * kTile + threadIdx.x;
  const int64_t wrow = int64_t(blockIdx.y) * kTile + threadIdx.y;
  Acc acc = 0;
  for (int64_t k0 = 0; k0 < in; k0 += kTile) {
    const int64_t k = k0 + threadIdx.x;
    xs[threadIdx.y][threadIdx.x] = (m < rows && k < in) ? Acc(float(x[m * in + k])) : Acc(0);
    ws[threadIdx.y][threadIdx.x] = (wrow < out && k < in) ? Acc(float(w[wrow * in + k])) : Acc(0);
    __syncthreads();
    for (int kk = 0; kk < kTile; ++kk) acc += xs[threadIdx.y][kk] * ws[threadIdx.x][kk];
    __syncthreads();
  }
  if (m < rows && n < out) y[m * out + n] = Out(acc);
}

dim3 grid_for(int64_t rows, int64_t out) {
  // Rows on x (up to 2^31 blocks), output features on y (up to 65535 blocks).
  return dim3(static_cast<unsigned>((rows + kTile - 1) / kTile), static_cast<unsigned>((out + kTile - 1) / kTile));
}

}  // namespace

cudaError_t linear_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int64_t rows, int64_t in,
                        int64_t out, cudaStream_t stream) {
  linear_kernel<__nv_bfloat16, float, __nv_bfloat16><<<grid_for(rows, out), dim3(kTile, kTile), 0, stream>>>(
      x, w, y, rows, in, out);
  return cudaGetLastError();
}

cudaError_t linear_f64(const float* x, const float* w, double* y, int64_t rows, int64_t in, int64_t out,
                       cudaStream_t stream) {
  linear_kernel<float, double, double><<<grid_for(rows, out), dim3(kTile, kTile), 0, stream>>>(x, w, y, rows, in,
                                                                                                out);
  return cudaGetLastError();
}

}  // namespace gk_ref_gpu
