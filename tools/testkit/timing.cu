#include <algorithm>
#include <stdexcept>
#include <vector>

#include "cupti_recorder.hpp"
#include "device_buffer.hpp"
#include "timing.hpp"

namespace gk_testkit {

namespace {

TimingStats stats(std::vector<double> us) {
  TimingStats s;
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  const size_t n = us.size();
  s.valid = true;
  s.median_us = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
  s.min_us = us.front();
  s.max_us = us.back();
  return s;
}

}  // namespace

TimingResult time_call(const std::function<void(cudaStream_t, int)>& call, cudaStream_t stream,
                       const TimingOptions& o) {
  int device = 0, l2 = 0;
  GK_TK_CUDA(cudaGetDevice(&device));
  GK_TK_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  DeviceBuffer scrub(size_t(2) * size_t(l2));
  cudaEvent_t start, stop;
  GK_TK_CUDA(cudaEventCreate(&start));
  GK_TK_CUDA(cudaEventCreate(&stop));
  auto& cupti = CuptiRecorder::instance();
  if (o.cupti) cupti.begin();
  std::vector<double> event_us;
  const int total = o.warmup + o.iterations;
  for (int i = 0; i < total; ++i) {
    GK_TK_CUDA(cudaMemsetAsync(scrub.get(), 0, scrub.bytes(), stream));
    GK_TK_CUDA(cudaEventRecord(start, stream));
    if (o.cupti) cupti.push(static_cast<uint64_t>(i));
    call(stream, i);
    if (o.cupti) cupti.pop();
    GK_TK_CUDA(cudaEventRecord(stop, stream));
    GK_TK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    GK_TK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (i >= o.warmup) event_us.push_back(1e3 * ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  TimingResult r;
  r.iterations = o.iterations;
  if (o.events) r.events = stats(event_us);
  if (o.cupti) {
    const auto spans = cupti.end();
    std::vector<double> us;
    for (int i = o.warmup; i < total; ++i) {
      auto it = spans.find(static_cast<uint64_t>(i));
      if (it == spans.end()) {
        throw std::runtime_error("CUPTI recorded no GPU activity for timed iteration " + std::to_string(i));
      }
      us.push_back(it->second * 1e-3);
    }
    r.cupti = stats(us);
  }
  return r;
}

TimingResult time_cold_l2(const std::function<void(cudaStream_t)>& call, cudaStream_t stream, int warmup,
                          int iterations) {
  TimingOptions o;
  o.warmup = warmup;
  o.iterations = iterations;
  return time_call([&](cudaStream_t s, int) { call(s); }, stream, o);
}

}  // namespace gk_testkit
