#include "cupti_recorder.hpp"

#include <cupti.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace gk_testkit {

namespace {

constexpr size_t kBufferBytes = size_t(8) << 20;
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};
constexpr CUpti_ActivityKind kApiKinds[] = {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

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
        rec.add(GpuActivity{k->start, k->end, k->name ? k->name : "", k->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
        rec.add(GpuActivity{m->start, m->end, "memcpy", m->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
        rec.add(GpuActivity{m->start, m->end, "memset", m->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(r);
        rec.add(ApiCall{a->start, a->correlationId});
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

void CuptiRecorder::begin(bool api) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    activities_.clear();
    api_calls_.clear();
  }
  api_ = api;
  if (!callbacks_registered_) {
    check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
    callbacks_registered_ = true;
  }
  for (auto k : kKinds) check(cuptiActivityEnable(k), "cuptiActivityEnable");
  if (api_) {
    for (auto k : kApiKinds) check(cuptiActivityEnable(k), "cuptiActivityEnable");
  }
}

std::vector<GpuActivity> CuptiRecorder::end() {
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  for (auto k : kKinds) check(cuptiActivityDisable(k), "cuptiActivityDisable");
  if (api_) {
    for (auto k : kApiKinds) check(cuptiActivityDisable(k), "cuptiActivityDisable");
  }
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(activities_);
}

std::vector<ApiCall> CuptiRecorder::api_calls() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(api_calls_);
}

uint64_t CuptiRecorder::timestamp_ns() {
  uint64_t t = 0;
  check(cuptiGetTimestamp(&t), "cuptiGetTimestamp");
  return t;
}

void CuptiRecorder::add(GpuActivity a) {
  std::lock_guard<std::mutex> lock(mu_);
  activities_.push_back(std::move(a));
}

void CuptiRecorder::add(ApiCall a) {
  std::lock_guard<std::mutex> lock(mu_);
  api_calls_.push_back(a);
}

}  // namespace gk_testkit
