// gk run: one operator on one shape (or every workload of a suite) with generated inputs, checked against a
// reference with the official rule; optionally timed with a simple cold-L2 loop. Without a GPU it computes the
// CPU reference for the generated inputs, which validates the configuration and the inputs but not a kernel.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <memory>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "device_buffer.hpp"
#include "gk/gk.hpp"
#include "env_overrides.hpp"
#include "problems.hpp"
#include "metrics.hpp"
#include "timing.hpp"

namespace gk_cli {

namespace {

// Cost of the CPU reference in multiply-adds (it computes every score, masked or not), to refuse shapes it
// would take minutes on.
double cpu_reference_macs(const Case& c) {
  return 0.5 * (c.gemma3 ? gk_testkit::gemma3_cost(c.g, c.cached) : gk_testkit::audio_cost(c.a)).flops_full;
}

// The CPU reference's host memory for a cached case: k and v caches as floats (2 GiB at most).
bool cpu_cache_fits(const Case& c) {
  return !c.gemma3 || c.cached == 0 ||
         2.0 * double(c.g.batch) * double(c.g.num_kv_heads) * double(c.cached + c.g.seq_len) * double(c.g.head_dim) *
                 4.0 <= 2.0 * (1 << 30);
}

std::string run_label(const Case& c) { return (c.suite_id == "custom" ? std::string(c.gemma3 ? "gemma3" : "audio") : c.suite_id) + " " + c.label(); }

gk_testkit::InputOptions input_options(const RunOptions& o) {
  gk_testkit::InputOptions in;
  in.activation_scale = float(o.activation_scale);
  in.norm_weight_spread = float(o.norm_weight_spread);
  if (o.mask_pattern == "padded") in.mask_pattern = gk_testkit::MaskPattern::kPaddedCausal;
  else if (o.mask_pattern != "causal") throw UsageError("--mask-pattern must be causal or padded");
  return in;
}

// Exit status when no GPU could run the fast path (0 pass, 1 a check failed, 2 a request that cannot be run).
constexpr int kExitNothingChecked = 3;

int run_cpu_only(const RunOptions& o, const std::vector<Case>& cases, uint64_t seed, const std::string& why) {
  std::printf("%s: the fast path needs an sm_90a GPU; computing the CPU reference only (nothing is checked)\n",
              why.c_str());
  for (const auto& c : cases) {
    if (cpu_reference_macs(c) > 2e10 || !cpu_cache_fits(c)) {
      std::fprintf(stderr, "gk: %s is too large for the CPU reference (%.3g multiply-adds, %s); use a smaller shape\n",
                   run_label(c).c_str(), cpu_reference_macs(c), cpu_cache_fits(c) ? "inputs fit" : "cache over 2 GiB");
      return 2;
    }
    const auto t0 = std::chrono::steady_clock::now();
    double sum_abs = 0, n = 0;
    bool finite = true;
    if (c.gemma3) {
      const auto recipe = gk_testkit::gemma3_recipe(seed, input_options(o));
      const auto in = gk_testkit::generate_host(c.g, recipe);
      std::vector<float> out(static_cast<size_t>(c.g.batch * c.g.seq_len * c.g.hidden));
      if (c.cached > 0) {  // the cache a GPU run would fill, and the new tokens after it
        const int64_t max_len = c.cached + c.g.seq_len, n = c.g.batch * c.g.num_kv_heads * max_len * c.g.head_dim;
        auto k = gk_testkit::fill_host(gk_testkit::gemma3_cache_fill(recipe, false), n, true);
        auto v = gk_testkit::fill_host(gk_testkit::gemma3_cache_fill(recipe, true), n, true);
        const std::vector<int64_t> lens(static_cast<size_t>(c.g.batch), c.cached),
            starts(static_cast<size_t>(c.g.batch), c.pad);
        gk_ref::gemma3_attention_cached(gk_testkit::ref_dims(c.g), in.view(),
                                        {k.data(), v.data(), max_len, lens.data(), c.pad > 0 ? starts.data() : nullptr},
                                        out.data());
      } else {
        gk_ref::gemma3_attention(gk_testkit::ref_dims(c.g), in.view(), out.data());
      }
      for (float v : out) sum_abs += std::fabs(v), finite = finite && std::isfinite(v);
      n = double(out.size());
    } else {
      const auto in = gk_testkit::generate_host(c.a, gk_testkit::audio_recipe(seed, input_options(o)));
      const size_t m = static_cast<size_t>(c.a.batch * c.a.seq_len * c.a.num_heads * c.a.head_dim);
      std::vector<double> q(m), k(m), v(m);
      gk_ref::audio_qkv(gk_testkit::ref_dims(c.a), in.hidden.data(), in.wq.data(), in.wk.data(), in.wv.data(),
                        in.qn.data(), in.kn.data(), q.data(), k.data(), v.data());
      for (const auto* t : {&q, &k, &v})
        for (double x : *t) sum_abs += std::fabs(x), finite = finite && std::isfinite(x);
      n = 3.0 * double(m);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-22s seed=%llu cpu-reference: mean |out| %.6f, %s, %.2f s\n", run_label(c).c_str(),
                static_cast<unsigned long long>(seed), sum_abs / n, finite ? "all finite" : "NON-FINITE VALUES", secs);
  }
  // Not a pass: no fast path ran (a script reading the exit status must not take this for one).
  std::printf("NOTHING CHECKED: no GPU ran the operators\n");
  return kExitNothingChecked;
}

}  // namespace

uint64_t clock_seed() {
  return static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
}

void add_run(CLI::App& app, RunOptions& o) {
  auto* cmd = app.add_subcommand("run", "Run an operator on generated inputs and check it against a reference");
  cmd->add_option("--suite", o.shape.suite,
                  "Run every workload of a built-in suite (047 | 054 | gemma3 | decode | all)");
  add_shape_options(cmd, o.shape);
  cmd->add_option("--mask-pattern", o.mask_pattern, "gemma3 additive mask contents: causal | padded")
      ->check(CLI::IsMember({"causal", "padded"}));
  cmd->add_option("--reference", o.reference, "Reference: auto (GPU when present) | gpu | cpu")
      ->check(CLI::IsMember({"auto", "gpu", "cpu"}));
  cmd->add_option("--seed", o.seed, "Input seed (default: from the clock)");
  cmd->add_option("--rounds", o.rounds, "Rounds of fresh inputs")->check(CLI::PositiveNumber);
  cmd->add_option("--activation-scale", o.activation_scale, "Scale of the random activations");
  cmd->add_option("--norm-weight-spread", o.norm_weight_spread, "Norm weights 1 + spread*randn (0: ones)");
  cmd->add_flag("--time", o.time, "Also time the fast path (cold L2, CUDA events, median of 50)");
}

int run(const RunOptions& o) {
  const std::vector<Case> cases = build_cases(o.shape);
  const uint64_t seed = o.seed ? o.seed : clock_seed();
  std::string why;
  if (!gk_testkit::cuda_device_available(&why)) {
    if (o.reference == "gpu") throw UsageError(why + ": --reference gpu needs a GPU");
    if (o.time) throw UsageError(why + ": --time needs a GPU");
    return run_cpu_only(o, cases, seed, why);
  }
  gk::Handle handle;
  gk::Status hs = handle.init();
  if (hs.ok()) hs = gk_testkit::apply_env_overrides(handle.get());
  if (!hs.ok()) throw std::runtime_error(hs.message());
  cudaStream_t stream = nullptr;
  GK_TK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  struct Row {
    std::string label;
    bool pass = true;
    double worst_ratio = 1.0, max_err = 0.0, max_rel_l2 = 0.0;
    gk_testkit::TimingResult time;
  };
  std::vector<Row> rows;
  const gk_testkit::InputOptions inputs = input_options(o);
  for (const auto& c : cases) {
    const bool cpu_ref = o.reference == "cpu";
    if (cpu_ref && cpu_reference_macs(c) > 2e10) {
      throw UsageError(run_label(c) + " is too large for the CPU reference; use --reference gpu");
    }
    auto problem = c.gemma3 ? gk_testkit::OperatorProblem::make(c.g, c.weights, c.cached, c.pad)
                            : gk_testkit::OperatorProblem::make(c.a);
    Row row;
    row.label = run_label(c);
    std::string plan;
    const gk::Status ps = problem->plan(handle.get(), &plan);
    std::printf("%s plan: %s\n", run_label(c).c_str(), ps.ok() ? plan.c_str() : ps.message().c_str());
    for (int r = 0; r < o.rounds; ++r) {
      const uint64_t s = seed + static_cast<uint64_t>(r);
      const gk::Status st = problem->run_fresh(s, inputs, handle.get(), stream);
      if (!st.ok()) {
        std::printf("%s round %d seed %llu: ERROR %s\n", run_label(c).c_str(), r + 1, static_cast<unsigned long long>(s),
                    st.message().c_str());
        row.pass = false;
        continue;
      }
      for (const auto& [name, j] : problem->check(c.atol, c.rtol, cpu_ref, stream)) {
        std::printf("%s round %d seed %llu %s (atol %g rtol %g, %s reference): %s\n", run_label(c).c_str(), r + 1,
                    static_cast<unsigned long long>(s), name.c_str(), c.atol, c.rtol, cpu_ref ? "cpu" : "gpu",
                    j.summary(c.required).c_str());
        row.pass = row.pass && j.passed(c.required);
        row.worst_ratio = std::min(row.worst_ratio, j.matched_ratio());
        row.max_err = std::max(row.max_err, j.max_abs_err);
        row.max_rel_l2 = std::max(row.max_rel_l2, j.rel_l2());
      }
    }
    if (o.time) {
      row.time = gk_testkit::time_cold_l2(
          [&](cudaStream_t st) {
            const gk::Status s = problem->run(handle.get(), st);
            if (!s.ok()) throw std::runtime_error(s.message());
          },
          stream);
    }
    std::fflush(stdout);
    rows.push_back(row);
  }
  cudaStreamDestroy(stream);

  std::printf("\n== summary: %d round(s) of fresh inputs per workload, official rule%s ==\n", o.rounds,
              o.time ? "; time = median of 50 cold-L2 iterations (CUDA events)" : "");
  std::printf("%-24s %-6s %-10s %-11s %-9s", "workload", "result", "matched", "max_abs_err", "rel_l2");
  if (o.time) std::printf(" %10s %10s %10s", "median_us", "min_us", "max_us");
  std::printf("\n");
  bool all_pass = true;
  double time_sum = 0;
  for (const auto& r : rows) {
    std::printf("%-24s %-6s %-10.6f %-11.4g %-9.3g", r.label.c_str(), r.pass ? "pass" : "FAIL", r.worst_ratio,
                r.max_err, r.max_rel_l2);
    if (o.time) std::printf(" %10.1f %10.1f %10.1f", r.time.events.median_us, r.time.events.min_us, r.time.events.max_us);
    std::printf("\n");
    all_pass = all_pass && r.pass;
    time_sum += r.time.events.median_us;
  }
  if (o.time && rows.size() > 1) {
    std::printf("mean of medians over %zu workloads: %.1f us\n", rows.size(), time_sum / double(rows.size()));
  }
  std::printf("%s\n", all_pass ? "ALL PASS" : "SOME CHECKS FAILED");
  return all_pass ? 0 : 1;
}

}  // namespace gk_cli
