// The host half of clock_sampler.hpp: summaries and names (testable without a GPU).
#include <algorithm>

#include "clock_sampler.hpp"

namespace gk_testkit {

std::string clock_reason_names(uint64_t reasons) {
  static const std::pair<uint64_t, const char*> kNames[] = {{kClockSwPowerCap, "sw_power_cap"},
                                                            {kClockHwSlowdown, "hw_slowdown"},
                                                            {kClockSwThermal, "sw_thermal"},
                                                            {kClockHwThermal, "hw_thermal"},
                                                            {kClockHwPowerBrake, "hw_power_brake"}};
  std::string out;
  for (const auto& [bit, name] : kNames) {
    if (reasons & bit) out += (out.empty() ? "" : ",") + std::string(name);
  }
  return out;
}

ClockStats summarize_clock_samples(const std::vector<std::pair<unsigned, uint64_t>>& samples) {
  ClockStats s;
  if (samples.empty()) return s;
  std::vector<unsigned> mhz;
  int slowed = 0;
  for (const auto& [m, r] : samples) {
    mhz.push_back(m);
    s.reasons |= r & kClockSlowdownMask;
    slowed += (r & kClockSlowdownMask) != 0;
  }
  std::sort(mhz.begin(), mhz.end());
  const size_t n = mhz.size();
  s.valid = true;
  s.samples = static_cast<int>(n);
  s.median_mhz = n % 2 ? mhz[n / 2] : 0.5 * (mhz[n / 2 - 1] + mhz[n / 2]);
  s.min_mhz = mhz.front();
  s.max_mhz = mhz.back();
  s.slowed_fraction = double(slowed) / double(n);
  return s;
}

}  // namespace gk_testkit
