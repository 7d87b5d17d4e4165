#include "bench_report.hpp"

#include <cmath>
#include <cstdio>

namespace gk_testkit {

namespace {

template <typename F>
double mean_of(const std::vector<WorkloadResult>& w, F f) {
  if (w.empty()) return 0;
  double s = 0;
  for (const auto& x : w) s += f(x);
  return s / double(w.size());
}

nlohmann::json stats_json(const TimingStats& s) {
  if (!s.valid) return nullptr;
  return {{"median_us", s.median_us}, {"min_us", s.min_us}, {"max_us", s.max_us}};
}

nlohmann::json clock_json(const ClockStats& c) {
  if (!c.valid) return nullptr;
  return {{"median_mhz", c.median_mhz},
          {"min_mhz", c.min_mhz},
          {"max_mhz", c.max_mhz},
          {"samples", c.samples},
          {"slowdown_reasons", clock_reason_names(c.reasons)},
          {"slowed_fraction", c.slowed_fraction}};
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}

}  // namespace

double SuiteResult::mean_us() const {
  return mean_of(workloads, [](const WorkloadResult& w) { return w.primary().median_us; });
}

double SuiteResult::geomean_us() const {
  if (workloads.empty()) return 0;
  return std::exp(mean_of(workloads, [](const WorkloadResult& w) { return std::log(w.primary().median_us); }));
}

double SuiteResult::floor_mean_us() const {
  return mean_of(workloads, [](const WorkloadResult& w) { return w.floor.us(); });
}

double SuiteResult::floor_full_mean_us() const {
  return mean_of(workloads, [](const WorkloadResult& w) { return w.floor_full.us(); });
}

bool SuiteResult::all_pass() const {
  for (const auto& w : workloads)
    if (!w.check.pass) return false;
  return !workloads.empty();
}

std::string BenchReport::timer_name() const {
  if (protocol.official) return "official (SOL-ExecBench's CUPTI method: API records, correlation ids)";
  if (protocol.cupti && protocol.events) return "cupti (events alongside)";
  return protocol.cupti ? "cupti" : "events";
}

nlohmann::json to_json(const BenchReport& r) {
  nlohmann::json j;
  j["schema"] = "gk-bench/1";
  j["git_commit"] = r.git_commit;
  j["created_utc"] = r.created_utc;
  j["timer"] = r.protocol.official ? "official" : (r.protocol.cupti ? "cupti" : "events");
  j["timers"] = nlohmann::json::array();
  if (r.protocol.cupti) j["timers"].push_back("cupti");
  if (r.protocol.events) j["timers"].push_back("events");
  const auto& d = r.device;
  j["device"] = {{"name", d.name},
                 {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
                 {"sm_count", d.sm_count},
                 {"sm_clock_max_mhz", d.sm_clock_max_mhz},
                 {"memory_clock_mhz", d.mem_clock_mhz},
                 {"memory_gib", d.memory_gib},
                 {"l2_mib", d.l2_mib},
                 {"driver", d.driver},
                 {"runtime", d.runtime}};
  j["peaks"] = {{"source", r.peaks.source},
                {"bf16_tflops", r.peaks.bf16_tflops},
                {"tf32_tflops", r.peaks.tf32_tflops},
                {"gbps", r.peaks.gbps}};
  j["protocol"] = {{"warmup", r.protocol.warmup},
                   {"iterations", r.protocol.iterations},
                   {"statistic", "median"},
                   {"l2_scrub_bytes", r.scrub_bytes},
                   {"input_sets", r.input_sets}};
  j["suites"] = nlohmann::json::array();
  for (const auto& s : r.suites) {
    nlohmann::json js = {{"id", s.id},
                         {"operator", s.op},
                         {"title", s.title},
                         {"precision", s.precision},
                         {"all_pass", s.all_pass()},
                         {"mean_us", s.mean_us()},
                         {"geomean_us", s.geomean_us()},
                         {"floor_mean_us", s.floor_mean_us()},
                         {"floor_full_mean_us", s.floor_full_mean_us()},
                         {"workloads", nlohmann::json::array()}};
    for (const auto& w : s.workloads) {
      const double t = w.primary().median_us;
      const auto& c = w.check;
      nlohmann::json acts = nlohmann::json::array();
      for (const auto& a : w.activities) {
        acts.push_back({{"name", a.name}, {"start_us", a.start_us}, {"duration_us", a.duration_us}});
      }
      js["workloads"].push_back({
          {"label", w.label},
          {"plan", w.plan},
          {"batch", w.batch},
          {"seq_len", w.seq_len},
          {"flops", w.cost.flops},
          {"bytes", w.cost.bytes},
          {"flops_full", w.cost.flops_full},
          {"bytes_full", w.cost.bytes_full},
          {"floor_us", w.floor.us()},
          {"floor_bound", w.floor.memory_bound() ? "memory" : "compute"},
          {"floor_full_us", w.floor_full.us()},
          {"time_us", t},
          {"cupti", stats_json(w.cupti)},
          {"events", stats_json(w.events)},
          {"host", stats_json(w.host)},
          {"tflops", t > 0 ? w.cost.flops / t * 1e-6 : 0.0},
          {"gbps", t > 0 ? w.cost.bytes / t * 1e-3 : 0.0},
          {"sol_pct", t > 0 ? 100.0 * w.floor.us() / t : 0.0},
          {"sol_full_pct", t > 0 ? 100.0 * w.floor_full.us() / t : 0.0},
          {"activities", acts},
          {"sm_clock", clock_json(w.clocks)},
          {"correctness",
           {{"checked", c.checked},
            {"pass", c.pass},
            {"verdict", c.verdict},
            {"rounds", c.rounds},
            {"atol", c.atol},
            {"rtol", c.rtol},
            {"required_matched_ratio", c.required_ratio},
            {"matched_ratio", c.matched_ratio},
            {"max_abs_err", c.max_abs_err},
            {"rel_l2", c.rel_l2}}},
      });
    }
    j["suites"].push_back(js);
  }
  return j;
}

std::string format_table(const BenchReport& r) {
  std::string out;
  const auto line = [&](const std::string& s) { out += s + "\n"; };
  char buf[512];
  std::snprintf(buf, sizeof(buf), "device: %s (%d SMs, max SM clock %d MHz, driver %s); timer: %s; %d+%d iterations, "
                "median; L2 scrub %.0f MiB; %d input set(s)",
                r.device.name.c_str(), r.device.sm_count, r.device.sm_clock_max_mhz, r.device.driver.c_str(),
                r.timer_name().c_str(), r.protocol.warmup, r.protocol.iterations, r.scrub_bytes / 1048576.0,
                r.input_sets);
  line(buf);
  std::snprintf(buf, sizeof(buf), "speed of light: %s: %.0f TFLOP/s bf16, %.0f TFLOP/s tf32, %.0f GB/s",
                r.peaks.source.c_str(), r.peaks.bf16_tflops, r.peaks.tf32_tflops, r.peaks.gbps);
  line(buf);
  const bool both = r.protocol.cupti && r.protocol.events;
  for (const auto& s : r.suites) {
    line("");
    line("suite " + s.id + " (" + s.op + (s.precision.empty() ? "" : ", " + s.precision) + "): " + s.title);
    std::snprintf(buf, sizeof(buf), "%-14s %-5s %-9s %-9s %9s %9s %9s%s %8s %7s %9s %6s %9s %6s %7s %6s", "workload",
                  "check", "matched", "max_err", "median_us", "min_us", "max_us", both ? "  events_us  ratio" : "",
                  "TFLOP/s", "GB/s", "floor_us", "SOL%", "nvfloor", "SOL%", "host_us", "SM_MHz");
    line(buf);
    std::string slowed;  // workloads timed while the driver held the clock down
    for (const auto& w : s.workloads) {
      const auto& p = w.primary();
      std::string ev;
      if (both && w.events.valid) {
        ev = fmt("  %9.1f", w.events.median_us) + fmt("  %5.3f", w.events.median_us / p.median_us);
      }
      std::snprintf(buf, sizeof(buf), "%-14s %-5s %-9.6f %-9.4g %9.1f %9.1f %9.1f%s %8.1f %7.0f %9.1f %5.1f%% %9.1f %5.1f%%",
                    w.label.c_str(), w.check.checked ? (w.check.pass ? "pass" : "FAIL") : "-", w.check.matched_ratio,
                    w.check.max_abs_err, p.median_us, p.min_us, p.max_us, ev.c_str(),
                    w.cost.flops / p.median_us * 1e-6, w.cost.bytes / p.median_us * 1e-3, w.floor.us(),
                    100.0 * w.floor.us() / p.median_us, w.floor_full.us(), 100.0 * w.floor_full.us() / p.median_us);
      std::string clock = w.clocks.valid ? fmt(" %6.0f", w.clocks.median_mhz) : "      -";
      if (w.clocks.reasons != 0) {
        clock += "*";
        slowed += (slowed.empty() ? "" : "; ") + w.label + fmt(" %.0f-", w.clocks.min_mhz) +
                  fmt("%.0f MHz, ", w.clocks.max_mhz) + clock_reason_names(w.clocks.reasons) +
                  fmt(" in %.0f%% of samples", 100.0 * w.clocks.slowed_fraction);
      }
      // The host time before the clock, whose slowdown mark would shift what follows it.
      const std::string host = w.host.valid ? fmt(" %7.1f", w.host.median_us) : "       -";
      line(buf + host + clock);
    }
    // NVML's readings lag by up to ~100 ms, so on a short timing loop a reason may date from just before it.
    if (!slowed.empty()) line("* slowdown reported by the driver while timing (readings lag ~100 ms): " + slowed);
    std::snprintf(buf, sizeof(buf),
                  "suite %s: mean %.1f us (arithmetic: the KernelIndex figure), geomean %.1f us; floor mean %.1f us "
                  "(%.1f%% of SOL), NVIDIA-convention floor mean %.1f us; %s",
                  s.id.c_str(), s.mean_us(), s.geomean_us(), s.floor_mean_us(), 100.0 * s.floor_mean_us() / s.mean_us(),
                  s.floor_full_mean_us(), s.all_pass() ? "every workload passed" : "SOME WORKLOADS FAILED");
    line(buf);
  }
  return out;
}

std::string format_breakdown(const BenchReport& r) {
  std::string out;
  for (const auto& s : r.suites) {
    for (const auto& w : s.workloads) {
      if (w.activities.empty()) continue;
      out += "suite " + s.id + " " + w.label + ": kernels in launch order (median start, duration, gap before)\n";
      if (!w.plan.empty()) out += "  plan: " + w.plan + "\n";
      double prev_end = 0, busy = 0;
      for (const auto& a : w.activities) {
        // Kernel names are long mangled or templated strings: the part before the first '(' or '<' is enough.
        std::string name = a.name.substr(0, a.name.find_first_of("(<"));
        if (name.size() > 60) name = name.substr(0, 60);
        char buf[256];
        std::snprintf(buf, sizeof(buf), "  %-60s start %8.1f  dur %8.1f  gap %6.1f\n", name.c_str(), a.start_us,
                      a.duration_us, a.start_us - prev_end);
        out += buf;
        prev_end = a.start_us + a.duration_us;
        busy += a.duration_us;
      }
      char buf[160];
      std::snprintf(buf, sizeof(buf), "  busy %.1f us of a %.1f us span\n", busy, w.primary().median_us);
      out += buf;
    }
  }
  return out;
}

}  // namespace gk_testkit
