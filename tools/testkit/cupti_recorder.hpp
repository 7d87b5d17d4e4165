// GPU activity records from CUPTI (kernels, memcpys, memsets), with their names, timestamps and correlation ids. By
// default only GPU activity kinds are enabled: API-call records add host overhead to every launch and so widen the
// gaps between the kernels of the call being timed. With `api` (SOL-ExecBench's method) the runtime and driver API
// records are enabled too, and a call's GPU work is found through the correlation ids of the API calls it made.
// One recorder per process (CUPTI's activity API is global).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace gk_testkit {

struct GpuActivity {
  uint64_t start_ns, end_ns;
  std::string name;  // kernel name; "memcpy" / "memset" otherwise
  uint32_t correlation = 0;
};

// A runtime or driver API call (recorded with `api` only).
struct ApiCall {
  uint64_t start_ns;
  uint32_t correlation;
};

class CuptiRecorder {
 public:
  static CuptiRecorder& instance();

  // Enables the activity kinds (with `api`, the runtime and driver API records too); throws std::runtime_error on a
  // CUPTI error.
  void begin(bool api = false);
  std::vector<GpuActivity> end();   // flushes, disables, returns everything recorded since begin()
  std::vector<ApiCall> api_calls();  // after end(): the API calls recorded since begin()
  static uint64_t timestamp_ns();   // CUPTI's clock, the one activity records use

  void add(GpuActivity a);  // from CUPTI's buffer callback
  void add(ApiCall a);

 private:
  CuptiRecorder() = default;
  std::mutex mu_;
  bool callbacks_registered_ = false, api_ = false;
  std::vector<GpuActivity> activities_;
  std::vector<ApiCall> api_calls_;
};

}  // namespace gk_testkit
