#include "attribution.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace gk_testkit {

std::vector<std::vector<GpuActivity>> attributed_activities(const std::vector<GpuActivity>& gpu, std::vector<ApiCall> api,
                                                            const std::vector<std::pair<uint64_t, uint64_t>>& windows) {
  std::sort(api.begin(), api.end(), [](const ApiCall& a, const ApiCall& b) { return a.start_ns < b.start_ns; });
  std::unordered_map<uint32_t, std::vector<const GpuActivity*>> by_correlation;
  for (const auto& a : gpu) by_correlation[a.correlation].push_back(&a);
  std::vector<std::vector<GpuActivity>> out;
  for (size_t i = 0; i < windows.size(); ++i) {
    const auto lo = std::lower_bound(api.begin(), api.end(), windows[i].first,
                                     [](const ApiCall& a, uint64_t t) { return a.start_ns < t; });
    std::vector<GpuActivity> mine;
    std::unordered_set<uint32_t> seen;
    for (auto it = lo; it != api.end() && it->start_ns <= windows[i].second; ++it) {
      if (!seen.insert(it->correlation).second) continue;
      const auto found = by_correlation.find(it->correlation);
      if (found == by_correlation.end()) continue;
      for (const GpuActivity* a : found->second) mine.push_back(*a);
    }
    out.push_back(std::move(mine));
  }
  return out;
}

std::vector<double> activity_spans_us(const std::vector<std::vector<GpuActivity>>& per_window, size_t skip) {
  std::vector<double> us;
  for (size_t i = skip; i < per_window.size(); ++i) {
    uint64_t first = UINT64_MAX, last = 0;
    for (const auto& a : per_window[i]) {
      first = std::min(first, a.start_ns);
      last = std::max(last, a.end_ns);
    }
    if (last == 0) throw std::runtime_error("official timer: no GPU activity for timed iteration " + std::to_string(i));
    us.push_back(double(last - first) * 1e-3);
  }
  return us;
}

std::vector<double> attributed_spans_us(const std::vector<GpuActivity>& gpu, std::vector<ApiCall> api,
                                        const std::vector<std::pair<uint64_t, uint64_t>>& windows, size_t skip) {
  return activity_spans_us(attributed_activities(gpu, std::move(api), windows), skip);
}

}  // namespace gk_testkit
