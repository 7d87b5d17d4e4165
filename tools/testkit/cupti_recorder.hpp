// GPU activity spans from CUPTI activity records: every kernel, memcpy and memset the timed call launches is
// attributed to its iteration through an external correlation id pushed around the call, so nothing else (the
// L2 scrub between iterations) can leak into a span. One recorder per process (CUPTI's activity API is global).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace gk_testkit {

class CuptiRecorder {
 public:
  static CuptiRecorder& instance();

  void begin();                // enables the activity kinds; throws std::runtime_error on a CUPTI error
  void push(uint64_t id);      // activities launched until pop() belong to `id`
  void pop();
  // Flushes, disables, and returns span (end of last - start of first, ns) per id, in id order.
  std::map<uint64_t, double> end();

  // Called from CUPTI's buffer callbacks.
  void add_activity(uint32_t correlation, uint64_t start, uint64_t end);
  void add_correlation(uint32_t correlation, uint64_t id);

 private:
  CuptiRecorder() = default;
  struct Interval {
    uint64_t start, end;
  };
  std::mutex mu_;
  bool callbacks_registered_ = false;
  std::vector<std::pair<uint32_t, Interval>> activities_;
  std::map<uint32_t, uint64_t> correlation_to_id_;
};

}  // namespace gk_testkit
