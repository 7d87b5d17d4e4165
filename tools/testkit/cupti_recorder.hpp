// GPU activity records from CUPTI (kernels, memcpys, memsets), with their names and timestamps. Only GPU
// activity kinds are enabled: API-call records would add host overhead to every launch and so widen the gaps
// between the kernels of the call being timed. One recorder per process (CUPTI's activity API is global).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace gk_testkit {

struct GpuActivity {
  uint64_t start_ns, end_ns;
  std::string name;  // kernel name; "memcpy" / "memset" otherwise
};

class CuptiRecorder {
 public:
  static CuptiRecorder& instance();

  void begin();                     // enables the activity kinds; throws std::runtime_error on a CUPTI error
  std::vector<GpuActivity> end();   // flushes, disables, returns everything recorded since begin()
  static uint64_t timestamp_ns();   // CUPTI's clock, the one activity records use

  void add(GpuActivity a);  // from CUPTI's buffer callback

 private:
  CuptiRecorder() = default;
  std::mutex mu_;
  bool callbacks_registered_ = false;
  std::vector<GpuActivity> activities_;
};

}  // namespace gk_testkit
