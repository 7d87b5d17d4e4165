#include <algorithm>
#include <vector>

#include "device_buffer.hpp"
#include "timing.hpp"

namespace gk_testkit {

TimingResult time_cold_l2(const std::function<void(cudaStream_t)>& call, cudaStream_t stream, int warmup,
                          int iterations) {
  int device = 0, l2 = 0;
  GK_TK_CUDA(cudaGetDevice(&device));
  GK_TK_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  DeviceBuffer scrub(size_t(2) * size_t(l2));
  cudaEvent_t start, stop;
  GK_TK_CUDA(cudaEventCreate(&start));
  GK_TK_CUDA(cudaEventCreate(&stop));
  std::vector<float> ms;
  for (int i = 0; i < warmup + iterations; ++i) {
    GK_TK_CUDA(cudaMemsetAsync(scrub.get(), 0, scrub.bytes(), stream));
    GK_TK_CUDA(cudaEventRecord(start, stream));
    call(stream);
    GK_TK_CUDA(cudaEventRecord(stop, stream));
    GK_TK_CUDA(cudaEventSynchronize(stop));
    float t = 0;
    GK_TK_CUDA(cudaEventElapsedTime(&t, start, stop));
    if (i >= warmup) ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  TimingResult r;
  r.iterations = iterations;
  r.median_us = 1e3 * (ms.size() % 2 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]));
  r.min_us = 1e3 * ms.front();
  r.max_us = 1e3 * ms.back();
  return r;
}

}  // namespace gk_testkit
