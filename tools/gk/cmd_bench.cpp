// gk bench: the suites measured the way SOL-ExecBench measures them. Every workload is first checked with the
// official rule against the GPU reference on several rounds of fresh inputs, then timed: 2xL2 scrub before
// every iteration, input sets rotated so pointers change, 10 warm-up + 50 timed iterations, median of the CUPTI
// span of the call's GPU activity (or CUDA events). Results against the speed of light; JSON with --json.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench_report.hpp"
#include "commands.hpp"
#include "device_buffer.hpp"
#include "device_info.hpp"
#include "gk/gk.hpp"
#include "metrics.hpp"
#include "env_overrides.hpp"
#include "problems.hpp"
#include "timing.hpp"

#ifndef GK_GIT_COMMIT
#define GK_GIT_COMMIT "unknown"
#endif

namespace gk_cli {

namespace {

void progress(const std::string& msg) {
  std::fprintf(stderr, "\r%-100s", msg.c_str());
  std::fflush(stderr);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void check_ok(const gk::Status& s) {
  if (!s.ok()) throw std::runtime_error(s.message());
}

gk_testkit::WorkloadResult bench_case(const Case& c, const BenchOptions& o, const gk_testkit::Peaks& peaks,
                                      const std::string& tag, gk_handle_t handle, cudaStream_t stream,
                                      uint64_t seed) {
  gk_testkit::WorkloadResult w;
  w.label = c.label();
  w.batch = c.batch;
  w.seq_len = c.seq_len;
  w.cost = c.gemma3 ? gk_testkit::gemma3_cost(c.g, c.cached) : gk_testkit::audio_cost(c.a);
  w.floor = gk_testkit::floor_of(w.cost, peaks);
  w.floor_full = gk_testkit::floor_of(w.cost, peaks, /*full=*/true);

  // One problem per input set: pointers change from iteration to iteration while timing.
  std::vector<std::unique_ptr<gk_testkit::OperatorProblem>> sets;
  for (int i = 0; i < o.input_sets; ++i) {
    sets.push_back(c.gemma3 ? gk_testkit::OperatorProblem::make(c.g, c.weights, c.cached, c.pad)
                            : gk_testkit::OperatorProblem::make(c.a, o.prepared_weights));
  }
  const gk_testkit::InputOptions inputs;  // the suites' recipe
  check_ok(sets[0]->plan(handle, &w.plan));
  // Prepared weights always take the fp16 path, whatever the handle's pins choose for fp32 weights.
  if (o.prepared_weights && !c.gemma3) w.plan = "prepared weights (fp16 path)";

  auto& k = w.check;
  k.atol = c.atol;
  k.rtol = c.rtol;
  k.required_ratio = c.required;
  k.pass = true;
  k.verdict = "pass";
  for (int r = 0; r < o.rounds; ++r) {
    progress(tag + ": checking, round " + std::to_string(r + 1) + "/" + std::to_string(o.rounds));
    check_ok(sets[0]->run_fresh(seed + 1000 * r, inputs, handle, stream));
    for (const auto& [name, j] : sets[0]->check(c.atol, c.rtol, /*cpu_reference=*/false, stream)) {
      k.checked = true;
      k.matched_ratio = std::min(k.matched_ratio, j.matched_ratio());
      k.max_abs_err = std::max(k.max_abs_err, j.max_abs_err);
      k.rel_l2 = std::max(k.rel_l2, j.rel_l2());
      if (k.pass && !j.passed(c.required)) {
        k.pass = false;
        k.verdict = j.verdict(c.required);
      }
    }
    k.rounds = r + 1;
  }

  progress(tag + ": timing");
  for (int s = 0; s < o.input_sets; ++s) check_ok(sets[s]->run_fresh(seed + 7 + s, inputs, handle, stream));
  gk_testkit::TimingOptions t;
  t.warmup = o.warmup;
  t.iterations = o.iterations;
  t.official = o.timer == "official";
  t.cupti = o.timer == "cupti" || o.timer == "both";
  t.events = o.timer == "events" || o.timer == "both";
  const auto timing = gk_testkit::time_call(
      [&](cudaStream_t st, int i) { check_ok(sets[i % o.input_sets]->run(handle, st)); }, stream, t);
  w.cupti = timing.cupti;
  w.events = timing.events;
  w.host = timing.host;
  w.activities = timing.activities;
  w.clocks = timing.clocks;
  return w;
}

}  // namespace

void add_bench(CLI::App& app, BenchOptions& o) {
  auto* cmd = app.add_subcommand(
      "bench", "Check and time the suites (or one workload, or a custom shape) as SOL-ExecBench does");
  o.shape.suite = "all";
  cmd->add_option("--suite", o.shape.suite, "Suite: 047 | 054 | gemma3 | decode | all (every built-in suite)");
  add_shape_options(cmd, o.shape);
  cmd->add_option("--timer", o.timer,
                  "cupti (span of the call's GPU activity) | events | both | official (SOL-ExecBench's own method: "
                  "API records enabled, the call's work found by correlation ids)")
      ->check(CLI::IsMember({"cupti", "events", "both", "official"}));
  cmd->add_option("--rounds", o.rounds, "Correctness rounds of fresh inputs before timing (0: skip)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--warmup", o.warmup, "Warm-up iterations")->check(CLI::NonNegativeNumber);
  cmd->add_option("--iters", o.iterations, "Timed iterations")->check(CLI::PositiveNumber);
  cmd->add_option("--input-sets", o.input_sets, "Input sets rotated through while timing")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--prepared-weights", o.prepared_weights,
                "audio: time calls on weights prepared once per input set (gk_audio_qkv_prepare, tf32 mode; the "
                "weights' conversion is then not in the timed call). The suites' numbers are from fp32 weights");
  cmd->add_option("--json", o.json, "Write every number to this JSON file (schema gk-bench/1)");
  cmd->add_option("--peak-tflops", o.peak_tflops, "bf16 dense peak, TFLOP/s (default: the device's datasheet)");
  cmd->add_option("--peak-tf32-tflops", o.peak_tf32_tflops, "tf32 dense peak, TFLOP/s");
  cmd->add_option("--peak-gbps", o.peak_gbps, "Memory bandwidth peak, GB/s");
  cmd->add_option("--seed", o.seed, "Input seed (default: from the clock)");
  cmd->add_flag("--breakdown", o.breakdown,
                "Also print each workload's kernels: median duration and gaps (CUPTI or official timer)");
  cmd->callback([cmd, &o] { o.custom = cmd->count("--op") > 0; });
}

int bench(const BenchOptions& o_in) {
  BenchOptions o = o_in;
  if (o.custom) o.shape.suite.clear();
  const std::vector<Case> cases = build_cases(o.shape);
  if (o.prepared_weights) {
    for (const Case& c : cases) {
      if (!c.gemma3 && c.a.precision != GK_PRECISION_TF32) {
        throw UsageError("--prepared-weights: prepared weights take the tf32 mode (--precision tf32)");
      }
    }
  }
  std::string why;
  if (!gk_testkit::cuda_device_available(&why)) throw UsageError(why + ": gk bench needs a CUDA GPU");

  gk_testkit::BenchReport report;
  report.device = gk_testkit::query_device();
  report.peaks = gk_testkit::peaks_for_device(report.device.name);
  if (o.peak_tflops > 0 || o.peak_tf32_tflops > 0 || o.peak_gbps > 0) {
    report.peaks.source = "user (" + report.peaks.source + " where not given)";
    if (o.peak_tflops > 0) report.peaks.bf16_tflops = o.peak_tflops;
    if (o.peak_tf32_tflops > 0) report.peaks.tf32_tflops = o.peak_tf32_tflops;
    if (o.peak_gbps > 0) report.peaks.gbps = o.peak_gbps;
  }
  const char* commit = std::getenv("GK_GIT_COMMIT");
  report.git_commit = commit ? commit : GK_GIT_COMMIT;
  report.created_utc = utc_now();
  report.protocol.warmup = o.warmup;
  report.protocol.iterations = o.iterations;
  report.protocol.official = o.timer == "official";
  report.protocol.cupti = o.timer == "cupti" || o.timer == "both" || report.protocol.official;
  report.protocol.events = o.timer == "events" || o.timer == "both";
  report.input_sets = o.input_sets;
  int dev = 0, l2 = 0;
  GK_TK_CUDA(cudaGetDevice(&dev));
  GK_TK_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  report.scrub_bytes = 2.0 * l2;

  gk::Handle handle;
  gk::Status hs = handle.init();
  if (hs.ok()) hs = gk_testkit::apply_env_overrides(handle.get());
  if (!hs.ok()) throw std::runtime_error(hs.message());
  cudaStream_t stream = nullptr;
  GK_TK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const uint64_t seed = o.seed ? o.seed : clock_seed();

  size_t index = 0;
  for (const auto& c : cases) {
    ++index;
    if (report.suites.empty() || report.suites.back().id != c.suite_id) {
      gk_testkit::SuiteResult s;
      s.id = c.suite_id;
      s.op = c.gemma3 ? "gemma3_attention" : "audio_qkv";
      s.title = c.suite_title + (o.prepared_weights && !c.gemma3 ? " [weights prepared once: gk_audio_qkv_prepare]" : "");
      s.precision = c.gemma3 ? "bf16" : (c.a.precision == GK_PRECISION_TF32 ? "tf32" : "exact");
      report.suites.push_back(s);
    }
    const std::string tag = "[" + std::to_string(index) + "/" + std::to_string(cases.size()) + "] " + c.suite_id +
                            " " + c.label();
    report.suites.back().workloads.push_back(bench_case(c, o, report.peaks, tag, handle.get(), stream, seed + index));
  }
  progress("");
  std::fprintf(stderr, "\r");
  cudaStreamDestroy(stream);

  std::fputs(gk_testkit::format_table(report).c_str(), stdout);
  std::printf("\nplans (gk_handle_set_overrides / GK_OVERRIDES syntax):\n");
  for (const auto& s : report.suites) {
    for (const auto& w : s.workloads) std::printf("  %s %-14s %s\n", s.id.c_str(), w.label.c_str(), w.plan.c_str());
  }
  if (o.breakdown) std::fputs(("\n" + gk_testkit::format_breakdown(report)).c_str(), stdout);
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    if (!f) throw std::runtime_error("cannot write " + o.json);
    f << gk_testkit::to_json(report).dump(1) << "\n";
    std::printf("wrote %s\n", o.json.c_str());
  }
  bool all = true;
  for (const auto& s : report.suites) all = all && s.all_pass();
  return all ? 0 : 1;
}

}  // namespace gk_cli
