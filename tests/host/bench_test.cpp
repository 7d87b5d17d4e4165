// The benchmark's arithmetic and its JSON document, checked without a GPU.
#include <gtest/gtest.h>

#include <cmath>

#include "bench_report.hpp"
#include "clock_sampler.hpp"
#include "metrics.hpp"
#include "suites.hpp"

namespace {

using namespace gk_testkit;

gk_gemma3_attention_config g047(int64_t b, int64_t s) {
  return gemma3_config(builtin_suite("047"), Workload{b, s, 0, 0, 0});
}

TEST(Metrics, Gemma3CountsMatchHandNumbers) {
  // (1, 128): q|k|v projection 2*128*3072*5120 = 4,026,531,840; O projection 2*128*3072*3072 = 2,415,919,104;
  // causal attention 2*1*24*128*129*128 = 101,449,728. Bytes (bf16): hidden 786,432 + cos/sin 65,536 +
  // Wq 18,874,368 + Wk,Wv 12,582,912 + Wo 18,874,368 + norm weights 512 + out 786,432 = 51,970,560.
  const Cost c = gemma3_cost(g047(1, 128));
  EXPECT_DOUBLE_EQ(c.flops, 6543900672.0);
  EXPECT_DOUBLE_EQ(c.bytes, 51970560.0);
  // NVIDIA's convention: full S^2 (4*24*128^2*128 = 201,326,592) and the [1,1,128,128] mask (32,768 bytes).
  EXPECT_DOUBLE_EQ(c.flops_full, 4026531840.0 + 2415919104.0 + 201326592.0);
  EXPECT_DOUBLE_EQ(c.bytes_full, 51970560.0 + 32768.0);
  // (4, 2053): M = 8212; 2*8212*3072*5120 + 2*8212*3072*3072 + 2*4*24*2053*2054*128 = 516,957,093,888.
  EXPECT_DOUBLE_EQ(gemma3_cost(g047(4, 2053)).flops, 516957093888.0);
}

TEST(Metrics, CachedCallCountsTheCacheRead) {
  // One new token after 8192 cached (B = 1): attention over 8193 keys, 4*24*8193*128 = 100,675,584 FLOPs beside
  // the projections' 2*3072*5120 + 2*3072*3072 = 50,331,648; bytes: weights 50,331,648 + hidden 6,144 + cos/sin
  // 512 + norm weights 512 + out 6,144, and the cache: k and v of 8192 cached + 1 new tokens, 2*8*8193*128*2 =
  // 33,558,528.
  const Cost c = gemma3_cost(g047(1, 1), 8192);
  EXPECT_DOUBLE_EQ(c.flops, 50331648.0 + 100675584.0);
  EXPECT_DOUBLE_EQ(c.bytes, 50331648.0 + 6144.0 + 512.0 + 512.0 + 6144.0 + 33558528.0);
  // A window of 1024: the new token sees 1024 keys, 1023 of them cached.
  auto local = g047(1, 1);
  local.sliding_window = 1024;
  const Cost w = gemma3_cost(local, 8192);
  EXPECT_DOUBLE_EQ(w.flops, 50331648.0 + 4.0 * 24 * 1024 * 128);
  EXPECT_DOUBLE_EQ(w.bytes, 50331648.0 + 6144.0 + 512.0 + 512.0 + 6144.0 + 2.0 * 2 * 8 * 1024 * 128);
  // Memory-bound at the H200's 4.8 TB/s: (83,903,488 bytes) / 4.8e12 = 17.48 us, the floor issue 37 quotes.
  const Floor f = floor_of(c, peaks_for_device("NVIDIA H200"));
  EXPECT_TRUE(f.memory_bound());
  EXPECT_NEAR(f.us(), 17.48, 0.01);
}

TEST(Metrics, AudioCountsMatchHandNumbers) {
  // (1, 128): 2*128*1024*3*1024 = 805,306,368 FLOPs at the tf32 rate; bytes (fp32): hidden 524,288 + three
  // weights 12,582,912 + norm weights 1,024 + three outputs 1,572,864 = 14,681,088.
  const Cost c = audio_cost(audio_config(builtin_suite("054"), Workload{1, 128, 0, 0, 0}, GK_PRECISION_TF32));
  EXPECT_DOUBLE_EQ(c.flops, 805306368.0);
  EXPECT_DOUBLE_EQ(c.bytes, 14681088.0);
  EXPECT_TRUE(c.tf32);
  EXPECT_DOUBLE_EQ(c.flops_full, c.flops);
}

TEST(Metrics, SpeedOfLightArithmetic) {
  const Peaks h200 = peaks_for_device("NVIDIA H200");
  EXPECT_EQ(h200.bf16_tflops, 989);
  EXPECT_EQ(h200.gbps, 4800);
  EXPECT_EQ(peaks_for_device("NVIDIA H100 80GB HBM3").gbps, 3350);
  EXPECT_EQ(peaks_for_device("NVIDIA H100 PCIe").bf16_tflops, 756);
  EXPECT_NE(peaks_for_device("Some GPU").source.find("not in the table"), std::string::npos);
  // (1, 128) is memory-bound on the H200: 51,970,560 B / 4.8 TB/s = 10.827 us > 6.5439 GFLOP / 989 TF/s = 6.617 us.
  const Floor f = floor_of(gemma3_cost(g047(1, 128)), h200);
  EXPECT_NEAR(f.memory_us, 10.8272, 1e-3);
  EXPECT_NEAR(f.compute_us, 6.6167, 1e-3);
  EXPECT_TRUE(f.memory_bound());
  EXPECT_DOUBLE_EQ(f.us(), f.memory_us);
  // (1, 8192) is compute-bound; its full-S^2 floor is larger.
  const Floor big = floor_of(gemma3_cost(g047(1, 8192)), h200);
  EXPECT_FALSE(big.memory_bound());
  EXPECT_GT(floor_of(gemma3_cost(g047(1, 8192)), h200, true).us(), 1.4 * big.us());
  // Suite means of the datasheet floors, as SPEC.md states them: 047 206 us, 054 35 us.
  double m047 = 0, m054 = 0;
  for (const auto& w : builtin_suite("047").workloads) m047 += floor_of(gemma3_cost(g047(w.batch, w.seq_len)), h200).us();
  for (const auto& w : builtin_suite("054").workloads) {
    m054 += floor_of(audio_cost(audio_config(builtin_suite("054"), w, GK_PRECISION_TF32)), h200).us();
  }
  EXPECT_NEAR(m047 / 16, 206.4, 0.1);
  EXPECT_NEAR(m054 / 16, 35.4, 0.1);
}

BenchReport sample_report() {
  BenchReport r;
  r.git_commit = "abc123";
  r.created_utc = "2026-11-30T00:00:00Z";
  r.device.name = "NVIDIA H200";
  r.device.sm_count = 132;
  r.peaks = peaks_for_device(r.device.name);
  r.protocol.cupti = r.protocol.events = true;
  SuiteResult s;
  s.id = "047";
  s.op = "gemma3_attention";
  for (double t : {100.0, 400.0}) {
    WorkloadResult w;
    w.label = "B=1 S=128";
    w.cost = gemma3_cost(g047(1, 128));
    w.floor = floor_of(w.cost, r.peaks);
    w.floor_full = floor_of(w.cost, r.peaks, true);
    w.cupti = {true, t, t - 1, t + 1};
    w.events = {true, t + 2, t, t + 5};
    w.host = {true, 20.5, 19.0, 40.0};
    w.check.checked = w.check.pass = true;
    s.workloads.push_back(w);
  }
  r.suites.push_back(s);
  return r;
}

TEST(BenchReport, SuiteStatistics) {
  const auto s = sample_report().suites[0];
  EXPECT_DOUBLE_EQ(s.mean_us(), 250.0);     // arithmetic: the KernelIndex figure
  EXPECT_DOUBLE_EQ(s.geomean_us(), 200.0);  // sqrt(100 * 400)
  EXPECT_TRUE(s.all_pass());
}

TEST(BenchReport, JsonSchema) {
  const auto j = to_json(sample_report());
  EXPECT_EQ(j.at("schema"), "gk-bench/1");
  EXPECT_EQ(j.at("timer"), "cupti");
  EXPECT_EQ(j.at("timers").size(), 2u);
  for (const char* k : {"git_commit", "created_utc", "device", "peaks", "protocol", "suites"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  for (const char* k : {"name", "sm_count", "sm_clock_max_mhz", "driver"}) EXPECT_TRUE(j["device"].contains(k)) << k;
  const auto& s = j.at("suites").at(0);
  EXPECT_DOUBLE_EQ(s.at("mean_us").get<double>(), 250.0);
  const auto& w = s.at("workloads").at(0);
  for (const char* k : {"batch", "seq_len", "flops", "bytes", "flops_full", "bytes_full", "floor_us", "floor_full_us",
                        "time_us", "tflops", "gbps", "sol_pct", "sol_full_pct", "cupti", "events", "host",
                        "correctness"}) {
    EXPECT_TRUE(w.contains(k)) << k;
  }
  EXPECT_DOUBLE_EQ(w.at("time_us").get<double>(), 100.0);  // the CUPTI median when CUPTI timed
  EXPECT_DOUBLE_EQ(w.at("events").at("median_us").get<double>(), 102.0);
  EXPECT_DOUBLE_EQ(w.at("host").at("median_us").get<double>(), 20.5);
  EXPECT_NEAR(w.at("tflops").get<double>(), 6543900672.0 / 100e-6 / 1e12, 1e-9);
  EXPECT_NEAR(w.at("sol_pct").get<double>(), 100.0 * 10.8272 / 100.0, 1e-3);
  EXPECT_TRUE(w.at("correctness").at("pass").get<bool>());
  const std::string table = format_table(sample_report());
  EXPECT_NE(table.find("suite 047: mean 250.0 us"), std::string::npos) << table;
  EXPECT_NE(table.find("events_us"), std::string::npos) << table;
  EXPECT_NE(table.find("host_us"), std::string::npos) << table;
  EXPECT_NE(table.find("   20.5"), std::string::npos) << table;
}

TEST(BenchReport, KernelBreakdown) {
  BenchReport r = sample_report();
  auto& w = r.suites[0].workloads[0];
  // Two kernels: 0..10 us and 12..100 us of a 100 us span: 2 us idle in between, 98 us busy.
  w.activities = {{"_ZN2gk6gemma3some_kernel(int, float)", 0.0, 10.0}, {"nvjet_sm90_gemm<bf16>", 12.0, 88.0}};
  const auto j = to_json(r);
  const auto& acts = j.at("suites").at(0).at("workloads").at(0).at("activities");
  ASSERT_EQ(acts.size(), 2u);
  EXPECT_EQ(acts.at(1).at("name"), "nvjet_sm90_gemm<bf16>");
  EXPECT_DOUBLE_EQ(acts.at(1).at("start_us").get<double>(), 12.0);
  EXPECT_DOUBLE_EQ(acts.at(1).at("duration_us").get<double>(), 88.0);
  EXPECT_TRUE(j.at("suites").at(0).at("workloads").at(1).at("activities").empty());
  const std::string text = format_breakdown(r);
  // Names are cut at the first '(' or '<'; the second kernel starts 2 us after the first ended.
  EXPECT_NE(text.find("_ZN2gk6gemma3some_kernel "), std::string::npos) << text;
  EXPECT_EQ(text.find("(int"), std::string::npos) << text;
  EXPECT_NE(text.find("nvjet_sm90_gemm "), std::string::npos) << text;
  EXPECT_NE(text.find("gap    2.0"), std::string::npos) << text;
  EXPECT_NE(text.find("busy 98.0 us of a 100.0 us span"), std::string::npos) << text;
  // A workload without activities (the events timer alone) prints nothing.
  EXPECT_EQ(text.find("B=1 S=128: kernels", text.find("busy")), std::string::npos) << text;
}

TEST(BenchReport, ClockSamples) {
  EXPECT_FALSE(summarize_clock_samples({}).valid);
  // NVML's idle bit (0x1) is not a slowdown; the power cap (0x4) and thermal slowdown (0x20) are.
  const ClockStats c = summarize_clock_samples({{1980, 0x1}, {1725, 0x4}, {1650, 0x24}, {1980, 0}});
  ASSERT_TRUE(c.valid);
  EXPECT_EQ(c.samples, 4);
  EXPECT_DOUBLE_EQ(c.median_mhz, 0.5 * (1725 + 1980));  // an even count: the middle two's mean
  EXPECT_DOUBLE_EQ(c.min_mhz, 1650);
  EXPECT_DOUBLE_EQ(c.max_mhz, 1980);
  EXPECT_EQ(c.reasons, kClockSwPowerCap | kClockSwThermal);
  EXPECT_DOUBLE_EQ(c.slowed_fraction, 0.5);
  EXPECT_EQ(clock_reason_names(c.reasons), "sw_power_cap,sw_thermal");
  EXPECT_EQ(clock_reason_names(0), "");
  const ClockStats odd = summarize_clock_samples({{1980, 0x1}, {1725, 0x4}, {1650, 0x24}});
  EXPECT_DOUBLE_EQ(odd.median_mhz, 1725);

  BenchReport r = sample_report();
  r.suites[0].workloads[1].clocks = odd;
  const auto j = to_json(r);
  const auto& ws = j.at("suites").at(0).at("workloads");
  EXPECT_TRUE(ws.at(0).at("sm_clock").is_null());  // not sampled (no NVML)
  EXPECT_DOUBLE_EQ(ws.at(1).at("sm_clock").at("median_mhz").get<double>(), 1725);
  EXPECT_EQ(ws.at(1).at("sm_clock").at("slowdown_reasons"), "sw_power_cap,sw_thermal");
  const std::string table = format_table(r);
  EXPECT_NE(table.find(" 1725*"), std::string::npos) << table;
  EXPECT_NE(table.find("* slowdown reported by the driver while timing (readings lag ~100 ms): B=1 S=128 1650-1980 "
                       "MHz, sw_power_cap,sw_thermal in 67% of samples"),
            std::string::npos)
      << table;
}

}  // namespace
