#include "cupti_recorder.hpp"

#include <cupti.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace gk_testkit {

namespace {

constexpr size_t kBufferBytes = size_t(8) << 20;
// API records (runtime and driver) are needed too: CUPTI emits an external-correlation record ahead of each API
// record made inside a push/pop region, and GPU activities carry the correlation id of the API call that
// launched them (runtime for our kernels, possibly driver for library kernels).
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                         CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  throw std::runtime_error(std::string("CUPTI ") + what + " failed: " + (msg ? msg : "unknown error"));
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  auto& rec = CuptiRecorder::instance();
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    switch (r->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
        rec.add_activity(k->correlationId, k->start, k->end);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
        rec.add_activity(m->correlationId, m->start, m->end);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
        rec.add_activity(m->correlationId, m->start, m->end);
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(r);
        rec.add_correlation(e->correlationId, e->externalId);
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
}

}  // namespace

CuptiRecorder& CuptiRecorder::instance() {
  static CuptiRecorder r;
  return r;
}

void CuptiRecorder::begin() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    activities_.clear();
    correlation_to_id_.clear();
  }
  if (!callbacks_registered_) {
    check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
    callbacks_registered_ = true;
  }
  for (auto k : kKinds) check(cuptiActivityEnable(k), "cuptiActivityEnable");
}

void CuptiRecorder::push(uint64_t id) {
  check(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id),
        "cuptiActivityPushExternalCorrelationId");
}

void CuptiRecorder::pop() {
  uint64_t id = 0;
  check(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id),
        "cuptiActivityPopExternalCorrelationId");
}

std::map<uint64_t, double> CuptiRecorder::end() {
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  for (auto k : kKinds) check(cuptiActivityDisable(k), "cuptiActivityDisable");
  std::lock_guard<std::mutex> lock(mu_);
  std::map<uint64_t, Interval> per_id;
  for (const auto& [corr, iv] : activities_) {
    auto it = correlation_to_id_.find(corr);
    if (it == correlation_to_id_.end()) continue;  // launched outside any push/pop (the L2 scrub)
    auto [slot, fresh] = per_id.try_emplace(it->second, iv);
    if (!fresh) {
      slot->second.start = std::min(slot->second.start, iv.start);
      slot->second.end = std::max(slot->second.end, iv.end);
    }
  }
  std::map<uint64_t, double> spans;
  for (const auto& [id, iv] : per_id) spans[id] = double(iv.end - iv.start);
  return spans;
}

void CuptiRecorder::add_activity(uint32_t correlation, uint64_t start, uint64_t end) {
  std::lock_guard<std::mutex> lock(mu_);
  activities_.push_back({correlation, {start, end}});
}

void CuptiRecorder::add_correlation(uint32_t correlation, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  correlation_to_id_[correlation] = id;
}

}  // namespace gk_testkit
