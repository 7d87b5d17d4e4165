// Special-function throughput on the GPU it runs on: results per clock and SM for the fp32, f16x2 and bf16x2
// forms of tanh.approx and ex2.approx (the attention softmax's two MUFU operations), with FFMA as the yardstick,
// and the two ways of rounding fp32 to bf16 that the projection epilogues used: a scalar round trip (cvt to bf16
// and back: F2F plus a shift) and the packed pair conversion (F2FP, two results).
// Each thread runs 8 independent chains, so issue and latency do not limit; one 1024-thread block per SM.
//
//   build/bin/gk_micro_mufu    (one line per operation; H200 numbers in docs/perf-log.md v8, the conversions v23)
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

namespace {

constexpr int kChains = 8, kIters = 4096, kThreads = 1024;

template <int kOp>
__device__ __forceinline__ uint32_t apply(uint32_t x) {
  uint32_t y;
  if constexpr (kOp == 0) asm volatile("tanh.approx.f32 %0, %1;" : "=r"(y) : "r"(x));
  if constexpr (kOp == 1) asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=r"(y) : "r"(x));
  if constexpr (kOp == 2) asm volatile("tanh.approx.f16x2 %0, %1;" : "=r"(y) : "r"(x));
  if constexpr (kOp == 3) asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(x));
  if constexpr (kOp == 4) asm volatile("tanh.approx.bf16x2 %0, %1;" : "=r"(y) : "r"(x));
  if constexpr (kOp == 5) asm volatile("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(y) : "r"(x));
  if constexpr (kOp == 6) asm volatile("fma.rn.f32 %0, %1, %1, %1;" : "=r"(y) : "r"(x));
  if constexpr (kOp == 7) {
    asm volatile("{ .reg .b16 h; cvt.rn.bf16.f32 h, %1; cvt.f32.bf16 %0, h; }" : "=r"(y) : "r"(x));
  }
  if constexpr (kOp == 8) asm volatile("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(y) : "r"(x));
  return y;
}

template <int kOp>
__global__ void __launch_bounds__(kThreads, 1) throughput(uint32_t* out, long long* cycles) {
  uint32_t v[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) v[c] = 0x3c003c00u + threadIdx.x + c;  // small positive values
  __syncthreads();
  const long long t0 = clock64();
  for (int i = 0; i < kIters; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) v[c] = apply<kOp>(v[c]);
  }
  __syncthreads();
  const long long t1 = clock64();
  uint32_t acc = 0;
#pragma unroll
  for (int c = 0; c < kChains; ++c) acc ^= v[c];
  out[blockIdx.x * kThreads + threadIdx.x] = acc;
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <int kOp>
int measure(const char* name, int results_per_op, int sms, uint32_t* out, long long* cycles) {
  throughput<kOp><<<sms, kThreads>>>(out, cycles);  // warm-up
  throughput<kOp><<<sms, kThreads>>>(out, cycles);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("%s: %s\n", name, cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  long long c = 0;
  cudaMemcpy(&c, cycles, sizeof(c), cudaMemcpyDeviceToHost);
  const double ops = double(kThreads) * kIters * kChains * results_per_op;
  std::printf("%-22s %7.1f results / clock / SM\n", name, ops / double(c));
  return 0;
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  uint32_t* out = nullptr;
  long long* cycles = nullptr;
  cudaMalloc(&out, size_t(sms) * kThreads * sizeof(uint32_t));
  cudaMalloc(&cycles, size_t(sms) * sizeof(long long));
  int rc = 0;
  rc |= measure<0>("tanh.approx.f32", 1, sms, out, cycles);
  rc |= measure<1>("ex2.approx.ftz.f32", 1, sms, out, cycles);
  rc |= measure<2>("tanh.approx.f16x2", 2, sms, out, cycles);
  rc |= measure<3>("ex2.approx.f16x2", 2, sms, out, cycles);
  rc |= measure<4>("tanh.approx.bf16x2", 2, sms, out, cycles);
  rc |= measure<5>("ex2.approx.ftz.bf16x2", 2, sms, out, cycles);
  rc |= measure<6>("fma.rn.f32", 1, sms, out, cycles);
  rc |= measure<7>("bf16 round trip (F2F)", 1, sms, out, cycles);
  rc |= measure<8>("cvt.rn.bf16x2.f32", 2, sms, out, cycles);
  cudaFree(out);
  cudaFree(cycles);
  return rc;
}
