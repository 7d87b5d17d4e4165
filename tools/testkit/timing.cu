#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <stdexcept>
#include <utility>
#include <vector>

#include "attribution.hpp"
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

// The L2 scrub is our own kernel, not a memset, so its activity record can be told from the call's by name.
__global__ void l2_scrub_kernel(int4* p, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    p[i] = make_int4(0, 0, 0, 0);
  }
}
constexpr const char* kScrubKernelName = "l2_scrub_kernel";

// The loop's CUDA events and CUPTI recording, released also when a call throws mid-loop: the timing kit is a
// library (the CLI exits on the error, a test or another caller may go on, and CUPTI would still be recording).
struct Event {
  cudaEvent_t e = nullptr;
  Event() { GK_TK_CUDA(cudaEventCreate(&e)); }
  ~Event() {
    if (e != nullptr) cudaEventDestroy(e);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};
struct CuptiSession {
  CuptiRecorder& rec;
  bool active;
  CuptiSession(CuptiRecorder& r, bool on, bool api) : rec(r), active(on) {
    if (active) rec.begin(api);
  }
  std::vector<GpuActivity> finish() {
    active = false;
    return rec.end();
  }
  ~CuptiSession() {
    if (!active) return;
    try {
      rec.end();
    } catch (...) {  // already unwinding from the call's error: that one is the one to report
    }
  }
  CuptiSession(const CuptiSession&) = delete;
  CuptiSession& operator=(const CuptiSession&) = delete;
};

// Per launch-order position, medians over the timed iterations that launched the same number of activities.
std::vector<ActivityStat> activity_breakdown(std::vector<std::vector<GpuActivity>>& per_iteration,
                                             const std::vector<uint64_t>& first, int warmup) {
  std::vector<ActivityStat> out;
  const int total = static_cast<int>(per_iteration.size());
  if (warmup >= total) return out;
  for (auto& v : per_iteration) {
    std::sort(v.begin(), v.end(), [](const GpuActivity& a, const GpuActivity& b) { return a.start_ns < b.start_ns; });
  }
  const size_t n = per_iteration[warmup].size();
  for (size_t k = 0; k < n; ++k) {
    std::vector<double> start, duration;
    for (int i = warmup; i < total; ++i) {
      const auto& v = per_iteration[i];
      if (v.size() != n) continue;
      start.push_back(double(v[k].start_ns - first[i]) * 1e-3);
      duration.push_back(double(v[k].end_ns - v[k].start_ns) * 1e-3);
    }
    out.push_back({per_iteration[warmup][k].name, stats(start).median_us, stats(duration).median_us});
  }
  return out;
}

}  // namespace

TimingResult time_call(const std::function<void(cudaStream_t, int)>& call, cudaStream_t stream,
                       const TimingOptions& o) {
  int device = 0, l2 = 0;
  GK_TK_CUDA(cudaGetDevice(&device));
  GK_TK_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  DeviceBuffer scrub(size_t(2) * size_t(l2));  // a multiple of 16 bytes
  const Event start_event, stop_event;
  const cudaEvent_t start = start_event.e, stop = stop_event.e;
  const bool use_events = o.events && !o.official;  // the harness records no events around the call
  CuptiSession cupti(CuptiRecorder::instance(), o.cupti || o.official, o.official);
  std::vector<std::pair<uint64_t, uint64_t>> windows;  // official: host timestamps around each call
  std::vector<double> event_us, host_us;
  const int total = o.warmup + o.iterations;
  // Host timestamps after each iteration's completion: the GPU activity of iteration i lies between the
  // (i-1)-th and the i-th (it is launched after the first and finished before the second).
  std::vector<uint64_t> done_ns;
  done_ns.push_back(CuptiRecorder::timestamp_ns());
  const size_t scrub_n = scrub.bytes() / sizeof(int4);
  ClockSampler clocks(device);
  for (int i = 0; i < total; ++i) {
    if (i == o.warmup) clocks.start();
    l2_scrub_kernel<<<132 * 8, 512, 0, stream>>>(scrub.as<int4>(), scrub_n);
    GK_TK_CUDA(cudaGetLastError());
    if (use_events) GK_TK_CUDA(cudaEventRecord(start, stream));
    // The stream holds at most the scrub ahead of the call (each iteration ends synchronized), so enqueueing never
    // waits for room in the launch queue: this is the call's own host time.
    // The harness's call reaches the library through Python, whose overhead outlasts the scrub: the GPU is idle when
    // the call's first launch comes, so every host delay between its launches shows as a gap. Waiting for the scrub
    // here gives the same start.
    if (o.official) GK_TK_CUDA(cudaStreamSynchronize(stream));
    const uint64_t cpu0 = o.official ? CuptiRecorder::timestamp_ns() : 0;
    const auto host0 = std::chrono::steady_clock::now();
    call(stream, i);
    const auto host1 = std::chrono::steady_clock::now();
    if (o.official) {
      windows.emplace_back(cpu0, CuptiRecorder::timestamp_ns());
      GK_TK_CUDA(cudaStreamSynchronize(stream));
    } else {
      if (use_events) GK_TK_CUDA(cudaEventRecord(stop, stream));
      GK_TK_CUDA(use_events ? cudaEventSynchronize(stop) : cudaStreamSynchronize(stream));
    }
    done_ns.push_back(CuptiRecorder::timestamp_ns());
    float ms = 0;
    if (use_events) GK_TK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (i >= o.warmup) {
      if (use_events) event_us.push_back(1e3 * ms);
      host_us.push_back(std::chrono::duration<double, std::micro>(host1 - host0).count());
    }
  }
  TimingResult r;
  r.clocks = clocks.stop();
  r.iterations = o.iterations;
  if (use_events) r.events = stats(event_us);
  r.host = stats(host_us);
  if (o.official) {
    auto gpu = cupti.finish();  // flushes: the API records are complete only after it
    // Every iteration's activities as the harness attributes them: the timed ones' spans, and the breakdown of
    // what it counts (per iteration, the kernels and gaps).
    auto per_iteration = attributed_activities(gpu, CuptiRecorder::instance().api_calls(), windows);
    r.cupti = stats(activity_spans_us(per_iteration, size_t(o.warmup)));
    std::vector<uint64_t> first(per_iteration.size(), UINT64_MAX);
    for (size_t i = 0; i < per_iteration.size(); ++i) {
      for (const auto& a : per_iteration[i]) first[i] = std::min(first[i], a.start_ns);
    }
    r.activities = activity_breakdown(per_iteration, first, o.warmup);
  } else if (o.cupti) {
    std::vector<uint64_t> first(total, UINT64_MAX), last(total, 0);
    std::vector<std::vector<GpuActivity>> per_iteration(total);
    for (auto& a : cupti.finish()) {
      if (a.name.find(kScrubKernelName) != std::string::npos) continue;
      const auto it = std::lower_bound(done_ns.begin(), done_ns.end(), a.start_ns);  // first boundary >= start
      if (it == done_ns.begin() || it == done_ns.end()) continue;  // outside the timed loop
      const size_t i = static_cast<size_t>(it - done_ns.begin()) - 1;
      first[i] = std::min(first[i], a.start_ns);
      last[i] = std::max(last[i], a.end_ns);
      per_iteration[i].push_back(std::move(a));
    }
    std::vector<double> us;
    for (int i = o.warmup; i < total; ++i) {
      if (last[i] == 0) {
        throw std::runtime_error("CUPTI recorded no GPU activity for timed iteration " + std::to_string(i));
      }
      us.push_back(double(last[i] - first[i]) * 1e-3);
    }
    r.cupti = stats(us);
    r.activities = activity_breakdown(per_iteration, first, o.warmup);
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
