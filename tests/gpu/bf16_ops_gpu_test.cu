// The device side of the norm/RoPE pass's bit-identity argument (src/projection/norm_rope.cu,
// tests/host/bf16_rounding_test.cpp): __hmul2_rn and __hadd2_rn must give, for every pair of bf16 values, the
// fp32 product or sum rounded to bf16 once (what the layer's definition computes), both lanes of the pair, with
// subnormals kept. Exhaustive over all 2^32 ordered pairs; NaN against NaN counts as equal (inf * 0, inf - inf).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "gpu_test_util.hpp"

namespace {

__device__ bool same_bits(__nv_bfloat16 x, __nv_bfloat16 y) {
  const uint16_t bx = __bfloat16_as_ushort(x), by = __bfloat16_as_ushort(y);
  const bool nx = (bx & 0x7f80) == 0x7f80 && (bx & 0x7f) != 0, ny = (by & 0x7f80) == 0x7f80 && (by & 0x7f) != 0;
  return (nx && ny) || bx == by;
}

// Block a_bits takes every b; counts[0] and [1]: product and sum mismatches, counts[2]: pairs checked.
__global__ void bf16_ops_kernel(unsigned long long* counts) {
  __shared__ unsigned int bad_mul, bad_add;
  if (threadIdx.x == 0) bad_mul = bad_add = 0;
  __syncthreads();
  const __nv_bfloat16 a = __ushort_as_bfloat16(static_cast<unsigned short>(blockIdx.x));
  const float fa = __bfloat162float(a);
  for (uint32_t u = threadIdx.x; u <= 0xffff; u += blockDim.x) {
    const __nv_bfloat16 b = __ushort_as_bfloat16(static_cast<unsigned short>(u));
    const float fb = __bfloat162float(b);
    const __nv_bfloat162 x = __halves2bfloat162(a, b), y = __halves2bfloat162(b, a);
    const __nv_bfloat162 m = __hmul2_rn(x, y), s = __hadd2_rn(x, y);
    const __nv_bfloat16 want_m = __float2bfloat16_rn(fa * fb), want_s = __float2bfloat16_rn(fa + fb);
    if (!same_bits(__low2bfloat16(m), want_m) || !same_bits(__high2bfloat16(m), want_m)) atomicAdd(&bad_mul, 1u);
    if (!same_bits(__low2bfloat16(s), want_s) || !same_bits(__high2bfloat16(s), want_s)) atomicAdd(&bad_add, 1u);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicAdd(&counts[0], bad_mul);
    atomicAdd(&counts[1], bad_add);
    atomicAdd(&counts[2], 0x10000ull);
  }
}

class Bf16DeviceOps : public gk_test::GpuTest {};

TEST_F(Bf16DeviceOps, MulAndAddRoundOnceLikeFp32) {
  unsigned long long* counts = nullptr;
  ASSERT_EQ(cudaMalloc(&counts, 3 * sizeof(unsigned long long)), cudaSuccess);
  ASSERT_EQ(cudaMemset(counts, 0, 3 * sizeof(unsigned long long)), cudaSuccess);
  bf16_ops_kernel<<<0x10000, 256>>>(counts);
  unsigned long long host[3] = {};
  const cudaError_t launch = cudaGetLastError();
  const cudaError_t copy = cudaMemcpy(host, counts, sizeof(host), cudaMemcpyDeviceToHost);
  cudaFree(counts);
  ASSERT_EQ(launch, cudaSuccess) << cudaGetErrorString(launch);
  ASSERT_EQ(copy, cudaSuccess) << cudaGetErrorString(copy);
  EXPECT_EQ(host[2], 1ull << 32);
  EXPECT_EQ(host[0], 0ull) << "pairs whose __hmul2_rn differs from the rounded fp32 product";
  EXPECT_EQ(host[1], 0ull) << "pairs whose __hadd2_rn differs from the rounded fp32 sum";
}

}  // namespace
