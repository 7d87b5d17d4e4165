#include <algorithm>

#include "device_buffer.hpp"
#include "fill.hpp"

namespace gk_testkit {

namespace {

template <typename T>
__global__ void fill_kernel(T* dst, int64_t n, FillSpec spec) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = T(fill_value_at(spec, i));
  }
}

__global__ void mask_kernel(__nv_bfloat16* dst, int64_t n, int64_t seq_len, MaskPattern pattern) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = __float2bfloat16_rn(mask_value_at(pattern, seq_len, i));
  }
}

unsigned grid_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 132 * 32)); }

}  // namespace

void fill(const FillSpec& spec, __nv_bfloat16* dst, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  fill_kernel<<<grid_for(n), 256, 0, stream>>>(dst, n, spec);
  GK_TK_CUDA(cudaGetLastError());
}

void fill(const FillSpec& spec, float* dst, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  fill_kernel<<<grid_for(n), 256, 0, stream>>>(dst, n, spec);
  GK_TK_CUDA(cudaGetLastError());
}

void fill_mask(__nv_bfloat16* mask, int64_t batch, int64_t seq_len, MaskPattern pattern, cudaStream_t stream) {
  const int64_t n = batch * seq_len * seq_len;
  mask_kernel<<<grid_for(n), 256, 0, stream>>>(mask, n, seq_len, pattern);
  GK_TK_CUDA(cudaGetLastError());
}

}  // namespace gk_testkit
