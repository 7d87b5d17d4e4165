// The benchmark's results: what was measured per workload and suite, how it compares with the speed of light,
// and its two renderings (a text table and the gk-bench/1 JSON document). Host-only.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "metrics.hpp"
#include "timing.hpp"

namespace gk_testkit {

struct DeviceInfo {
  std::string name;
  int sm_count = 0, cc_major = 0, cc_minor = 0;
  int sm_clock_max_mhz = 0, mem_clock_mhz = 0;
  double memory_gib = 0, l2_mib = 0;
  std::string driver, runtime;
};

struct Correctness {
  bool checked = false;
  bool pass = false;
  int rounds = 0;
  double atol = 0, rtol = 0, required_ratio = 0.99;
  double matched_ratio = 1.0;  // worst over rounds and outputs
  double max_abs_err = 0.0;    // worst over rounds and outputs
  double rel_l2 = 0.0;         // worst over rounds and outputs
  std::string verdict;         // "pass" or the first failure's reason
};

struct WorkloadResult {
  std::string label;  // "B=4 S=2053"
  std::string plan;   // the plan the call ran, in the override syntax (gk_*_plan)
  int64_t batch = 0, seq_len = 0;
  Cost cost;
  Floor floor, floor_full;
  Correctness check;
  TimingStats cupti, events;
  TimingStats host;  // the call's host time (enqueueing it), timing.hpp
  std::vector<ActivityStat> activities;  // CUPTI and official timers: each activity's median start and duration
  ClockStats clocks;                      // the SM clock while timing (NVML), where available

  const TimingStats& primary() const { return cupti.valid ? cupti : events; }
};

struct SuiteResult {
  std::string id, op, title, precision;
  std::vector<WorkloadResult> workloads;

  double mean_us() const;     // arithmetic mean of the primary medians: the KernelIndex figure
  double geomean_us() const;
  double floor_mean_us() const;
  double floor_full_mean_us() const;
  bool all_pass() const;
};

struct BenchReport {
  std::string git_commit, created_utc;
  DeviceInfo device;
  Peaks peaks;
  TimingOptions protocol;
  int input_sets = 1;
  double scrub_bytes = 0;
  std::vector<SuiteResult> suites;

  std::string timer_name() const;  // "cupti", "events" or "cupti (events alongside)"
};

nlohmann::json to_json(const BenchReport& report);
std::string format_table(const BenchReport& report);
// Per workload, the call's kernels in launch order with their median durations and the idle gaps between them.
std::string format_breakdown(const BenchReport& report);

}  // namespace gk_testkit
