// How fast a kernel can read N bytes that are not in L2, under two ways of evicting them first:
//   dirty: a 120 MiB cudaMemsetAsync before each iteration, as the harness and `gk bench` scrub (the L2 is then
//          full of modified lines, so every miss also writes one back);
//   clean: a read-only pass over the same 120 MiB (the L2 then holds clean lines, evicted for free).
// The reader keeps 8 independent 16-byte loads in flight per thread on every SM (grid-stride), which is more
// than enough to cover DRAM latency. CUDA events around the read kernel alone, median of 30.
//
//   build/bin/gk_micro_stream    (one line per size and scrub; docs/perf-log.md v12 has the H200 numbers)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "median.hpp"

namespace {

using gk_micro::median;

constexpr int kThreads = 512, kUnroll = 8;

__global__ void __launch_bounds__(kThreads) read_bytes(const uint4* __restrict__ p, size_t n16, uint32_t* sink) {
  uint32_t acc = 0;
  const size_t stride = size_t(gridDim.x) * kThreads;
  size_t i = size_t(blockIdx.x) * kThreads + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n16; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(p + i + u * stride);  // streaming: no reuse expected
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // keeps the loads; practically never taken
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t scrub_bytes = size_t(120) << 20, max_bytes = size_t(1) << 30;
  void *scrub = nullptr, *data = nullptr;
  uint32_t* sink = nullptr;
  if (cudaMalloc(&scrub, scrub_bytes) != cudaSuccess || cudaMalloc(&data, max_bytes) != cudaSuccess ||
      cudaMalloc(&sink, 4) != cudaSuccess) {
    std::printf("cudaMalloc failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  if (cudaMemset(data, 1, max_bytes) != cudaSuccess) {
    std::printf("cudaMemset failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  const int blocks = 4 * sms;  // 2048 threads per SM
  // 0: the launch and the events alone. 6.3 and 13.1: the audio operator's small rows (fp16 weights; fp32 weights
  // and 128 rows of activations). 18.9 - 50.3: the decode step's reads (docs/perf-log.md v49).
  const double sizes_mb[] = {0.0, 6.3, 13.1, 18.9, 31.5, 50.3, 256.0, 1024.0};
  for (const char* mode : {"dirty", "clean"}) {
    for (double mb : sizes_mb) {
      const size_t bytes = std::min(max_bytes, size_t(mb * 1e6) / 16 * 16);
      std::vector<float> us;
      for (int it = 0; it < 35; ++it) {
        if (mode[0] == 'd') {
          cudaMemsetAsync(scrub, it & 0xff, scrub_bytes);
        } else {
          read_bytes<<<blocks, kThreads>>>(static_cast<const uint4*>(scrub), scrub_bytes / 16, sink);
        }
        cudaEventRecord(t0);
        read_bytes<<<blocks, kThreads>>>(static_cast<const uint4*>(data), bytes / 16, sink);
        cudaEventRecord(t1);
        cudaEventSynchronize(t1);
        float ms = 0.f;
        cudaEventElapsedTime(&ms, t0, t1);
        if (it >= 5) us.push_back(ms * 1000.f);
      }
      const float m = median(us);
      std::printf("%-5s scrub  read %7.1f MB  %8.1f us  %6.2f TB/s\n", mode, bytes / 1e6, m, bytes / (m * 1e6));
    }
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) std::printf("CUDA error: %s\n", cudaGetErrorString(err));
  return err == cudaSuccess ? 0 : 1;
}
