// The SM clock and the driver's clock event reasons (power cap, thermal slowdown) sampled through NVML while a
// workload is timed, so a benchmark report says at which clock each number was taken. The clocks are not locked
// on the lent H200, and long workloads there run into the 700 W software power cap: the SM clock then drops from
// 1980 to ~1650-1770 MHz for the rest of the timing loop (docs/perf-log.md v15).
//
// NVML is opened at run time (libnvidia-ml.so.1, part of the driver), so nothing links against it; without it
// (no driver, CI) the stats stay invalid and the report leaves the clock out.
//
// Read the reasons more than the MHz: on the H200 NVML's clock reading changes only every ~80-100 ms (seen
// through nvidia-smi), so a timing loop of a few tens of ms gets one or two distinct values, and a loop the cap
// slowed could still read 1980. (Its energy counter moves as coarsely: average power over one loop read 1369 to
// 4736 W, so the report leaves power out.)
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace gk_testkit {

// NVML's clock event reason bits (nvmlClocksEventReason*) that slow the SM clock below what the load asks for.
inline constexpr uint64_t kClockSwPowerCap = 0x4, kClockHwSlowdown = 0x8, kClockSwThermal = 0x20,
                          kClockHwThermal = 0x40, kClockHwPowerBrake = 0x80;
inline constexpr uint64_t kClockSlowdownMask =
    kClockSwPowerCap | kClockHwSlowdown | kClockSwThermal | kClockHwThermal | kClockHwPowerBrake;

struct ClockStats {
  bool valid = false;
  int samples = 0;
  double median_mhz = 0, min_mhz = 0, max_mhz = 0;
  uint64_t reasons = 0;       // OR over the samples, slowdown bits only (kClockSlowdownMask)
  double slowed_fraction = 0;  // samples with any slowdown bit set
};

// "sw_power_cap,sw_thermal" for the slowdown bits set in `reasons`; "" for none.
std::string clock_reason_names(uint64_t reasons);

// Median, extremes and reasons of a list of (MHz, reason bits) samples; invalid when empty.
ClockStats summarize_clock_samples(const std::vector<std::pair<unsigned, uint64_t>>& samples);

// Samples every `period_ms` on a thread of its own between start() and stop(). GK_BENCH_CLOCKS=off leaves the
// thread out (to check that it does not move the timings).
class ClockSampler {
 public:
  static bool enabled();

  explicit ClockSampler(int cuda_device, int period_ms = 5);
  ~ClockSampler();
  ClockSampler(const ClockSampler&) = delete;
  ClockSampler& operator=(const ClockSampler&) = delete;

  void start();
  ClockStats stop();

 private:
  void* device_ = nullptr;  // nvmlDevice_t; null when NVML or the device is unavailable
  int period_ms_;
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::vector<std::pair<unsigned, uint64_t>> samples_;
};

}  // namespace gk_testkit
