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
#include "problems.hpp"
#include "suites.hpp"
#include "timing.hpp"

namespace gk_cli {

namespace {

using gk_testkit::Suite;
using gk_testkit::Workload;

struct Case {
  bool gemma3 = true;
  gk_gemma3_attention_config g{};
  gk_audio_qkv_config a{};
  double atol = 0, rtol = 0, required = 0.99;
  std::string label;
};

// Cost of the CPU reference in multiply-adds, to refuse shapes it would take minutes on.
double cpu_reference_macs(const Case& c) {
  if (c.gemma3) {
    const auto& g = c.g;
    const double M = double(g.batch) * g.seq_len, D = double(g.head_dim);
    return M * g.hidden * D * (2 * g.num_q_heads + 2 * g.num_kv_heads) + 2.0 * g.batch * g.num_q_heads * g.seq_len * g.seq_len * D;
  }
  return double(c.a.batch) * c.a.seq_len * c.a.hidden * 3 * c.a.num_heads * c.a.head_dim;
}

const Workload* find_workload(const Suite& s, int64_t batch, int64_t seq_len) {
  for (const auto& w : s.workloads)
    if (w.batch == batch && w.seq_len == seq_len) return &w;
  return nullptr;
}

double loosest(const Suite& s, bool atol) {
  double v = 0;
  for (const auto& w : s.workloads) v = std::max(v, atol ? w.atol : w.rtol);
  return v;
}

gk_precision parse_precision(const std::string& p) {
  if (p == "tf32") return GK_PRECISION_TF32;
  if (p == "exact") return GK_PRECISION_EXACT;
  throw UsageError("--precision must be tf32 or exact (got '" + p + "')");
}

std::vector<Case> build_cases_or_throw(const RunOptions& o);

std::vector<Case> build_cases(const RunOptions& o) {
  try {
    return build_cases_or_throw(o);
  } catch (const UsageError&) {
    throw;
  } catch (const std::runtime_error& e) {  // e.g. an unknown suite id
    throw UsageError(e.what());
  }
}

std::vector<Case> build_cases_or_throw(const RunOptions& o) {
  std::vector<Case> cases;
  if (!o.suite.empty()) {
    const Suite& s = gk_testkit::builtin_suite(o.suite);
    for (const auto& w : s.workloads) {
      Case c;
      c.gemma3 = s.op == "gemma3_attention";
      if (c.gemma3) c.g = gk_testkit::gemma3_config(s, w);
      else c.a = gk_testkit::audio_config(s, w, parse_precision(o.precision));
      c.atol = o.atol >= 0 ? o.atol : w.atol;
      c.rtol = o.rtol >= 0 ? o.rtol : w.rtol;
      c.required = s.required_matched_ratio;
      c.label = s.id + " B=" + std::to_string(w.batch) + " S=" + std::to_string(w.seq_len);
      cases.push_back(c);
    }
    return cases;
  }
  Case c;
  if (o.op == "gemma3") {
    const Suite& s = gk_testkit::builtin_suite("047");
    c.g = gk_testkit::gemma3_config(s, Workload{o.batch, o.seq_len, 0, 0, 0});
    if (o.hidden > 0) c.g.hidden = o.hidden;
    if (o.q_heads > 0) c.g.num_q_heads = o.q_heads;
    if (o.kv_heads > 0) c.g.num_kv_heads = o.kv_heads;
    c.g.head_dim = o.head_dim;
    if (o.softcap >= 0) c.g.softcap = float(o.softcap);
    if (o.eps >= 0) c.g.rms_norm_eps = float(o.eps);
    if (o.norm_offset >= 0) c.g.norm_weight_offset = float(o.norm_offset);
    c.g.query_scale = float(o.query_scale);
    if (o.mask == "causal") c.g.mask_mode = GK_MASK_CAUSAL;
    else if (o.mask == "additive") c.g.mask_mode = GK_MASK_ADDITIVE;
    else if (o.mask == "none") c.g.mask_mode = GK_MASK_NONE;
    else throw UsageError("--mask must be causal, additive or none (got '" + o.mask + "')");
    const Workload* w = find_workload(s, o.batch, o.seq_len);
    c.atol = o.atol >= 0 ? o.atol : (w ? w->atol : loosest(s, true));
    c.rtol = o.rtol >= 0 ? o.rtol : (w ? w->rtol : loosest(s, false));
    c.required = s.required_matched_ratio;
  } else if (o.op == "audio") {
    c.gemma3 = false;
    const Suite& s = gk_testkit::builtin_suite("054");
    c.a = gk_testkit::audio_config(s, Workload{o.batch, o.seq_len, 0, 0, 0}, parse_precision(o.precision));
    if (o.hidden > 0) c.a.hidden = o.hidden;
    if (o.heads > 0) c.a.num_heads = o.heads;
    c.a.head_dim = o.head_dim;
    if (o.eps >= 0) c.a.eps = float(o.eps);
    const Workload* w = find_workload(s, o.batch, o.seq_len);
    c.atol = o.atol >= 0 ? o.atol : (w ? w->atol : loosest(s, true));
    c.rtol = o.rtol >= 0 ? o.rtol : (w ? w->rtol : loosest(s, false));
    c.required = s.required_matched_ratio;
  } else {
    throw UsageError("--op must be gemma3 or audio (got '" + o.op + "')");
  }
  c.label = o.op + " B=" + std::to_string(o.batch) + " S=" + std::to_string(o.seq_len);
  cases.push_back(c);
  return cases;
}

// Validates the configuration with the library's own checks (no device needed).
void check_config(const Case& c) {
  size_t bytes = 0;
  const gk::Status s = c.gemma3 ? gk::gemma3_attention_workspace_size(c.g, &bytes)
                                : gk::audio_qkv_workspace_size(c.a, &bytes);
  if (!s.ok()) throw UsageError(s.message());
}

gk_testkit::Gemma3Recipe gemma3_recipe(const RunOptions& o, uint64_t seed) {
  gk_testkit::Gemma3Recipe r;
  r.seed = seed;
  r.activation_scale = float(o.activation_scale);
  r.norm_weight_spread = float(o.norm_weight_spread);
  if (o.mask_pattern == "padded") r.mask_pattern = gk_testkit::MaskPattern::kPaddedCausal;
  else if (o.mask_pattern != "causal") throw UsageError("--mask-pattern must be causal or padded");
  return r;
}

gk_testkit::AudioRecipe audio_recipe(const RunOptions& o, uint64_t seed) {
  return {seed, float(o.activation_scale), float(o.norm_weight_spread)};
}

int run_cpu_only(const RunOptions& o, const std::vector<Case>& cases, uint64_t seed, const std::string& why) {
  std::printf("%s: the fast path needs an sm_90a GPU; computing the CPU reference only (nothing is checked)\n",
              why.c_str());
  for (const auto& c : cases) {
    if (cpu_reference_macs(c) > 2e10) {
      std::fprintf(stderr, "gk: %s is too large for the CPU reference (%.3g multiply-adds); use a smaller shape\n",
                   c.label.c_str(), cpu_reference_macs(c));
      return 2;
    }
    const auto t0 = std::chrono::steady_clock::now();
    double sum_abs = 0, n = 0;
    bool finite = true;
    if (c.gemma3) {
      const auto in = gk_testkit::generate_host(c.g, gemma3_recipe(o, seed));
      std::vector<float> out(static_cast<size_t>(c.g.batch * c.g.seq_len * c.g.hidden));
      gk_ref::gemma3_attention(gk_testkit::ref_dims(c.g), in.view(), out.data());
      for (float v : out) sum_abs += std::fabs(v), finite = finite && std::isfinite(v);
      n = double(out.size());
    } else {
      const auto in = gk_testkit::generate_host(c.a, audio_recipe(o, seed));
      const size_t m = static_cast<size_t>(c.a.batch * c.a.seq_len * c.a.num_heads * c.a.head_dim);
      std::vector<double> q(m), k(m), v(m);
      gk_ref::audio_qkv(gk_testkit::ref_dims(c.a), in.hidden.data(), in.wq.data(), in.wk.data(), in.wv.data(),
                        in.qn.data(), in.kn.data(), q.data(), k.data(), v.data());
      for (const auto* t : {&q, &k, &v})
        for (double x : *t) sum_abs += std::fabs(x), finite = finite && std::isfinite(x);
      n = 3.0 * double(m);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-22s seed=%llu cpu-reference: mean |out| %.6f, %s, %.2f s\n", c.label.c_str(),
                static_cast<unsigned long long>(seed), sum_abs / n, finite ? "all finite" : "NON-FINITE VALUES", secs);
  }
  return 0;
}

}  // namespace

void add_run(CLI::App& app, RunOptions& o) {
  auto* cmd = app.add_subcommand("run", "Run an operator on generated inputs and check it against a reference");
  cmd->add_option("--op", o.op, "Operator: gemma3 | audio")->check(CLI::IsMember({"gemma3", "audio"}));
  cmd->add_option("--suite", o.suite, "Run every workload of a built-in suite (047 | 054)");
  cmd->add_option("-b,--batch", o.batch, "Batch size");
  cmd->add_option("-s,--seq-len", o.seq_len, "Sequence length");
  cmd->add_option("--hidden", o.hidden, "Hidden size (default: the suite's)");
  cmd->add_option("--q-heads", o.q_heads, "gemma3: query heads (default 24)");
  cmd->add_option("--kv-heads", o.kv_heads, "gemma3: key/value heads (default 8)");
  cmd->add_option("--heads", o.heads, "audio: heads (default 8)");
  cmd->add_option("--head-dim", o.head_dim, "Head dimension");
  cmd->add_option("--softcap", o.softcap, "gemma3: logit softcap, 0 = off (default 50)");
  cmd->add_option("--eps", o.eps, "RMSNorm epsilon (default 1e-6)");
  cmd->add_option("--norm-offset", o.norm_offset, "gemma3: RMSNorm weight offset (default 1)");
  cmd->add_option("--query-scale", o.query_scale, "gemma3: score scale, 0 = head_dim^-0.5");
  cmd->add_option("--mask", o.mask, "gemma3: causal | additive | none")
      ->check(CLI::IsMember({"causal", "additive", "none"}));
  cmd->add_option("--mask-pattern", o.mask_pattern, "gemma3 additive mask contents: causal | padded")
      ->check(CLI::IsMember({"causal", "padded"}));
  cmd->add_option("--precision", o.precision, "audio: tf32 | exact")->check(CLI::IsMember({"tf32", "exact"}));
  cmd->add_option("--reference", o.reference, "Reference: auto (GPU when present) | gpu | cpu")
      ->check(CLI::IsMember({"auto", "gpu", "cpu"}));
  cmd->add_option("--seed", o.seed, "Input seed (default: from the clock)");
  cmd->add_option("--rounds", o.rounds, "Rounds of fresh inputs")->check(CLI::PositiveNumber);
  cmd->add_option("--atol", o.atol, "Absolute tolerance (default: the suite workload's)");
  cmd->add_option("--rtol", o.rtol, "Relative tolerance (default: the suite workload's)");
  cmd->add_option("--activation-scale", o.activation_scale, "Scale of the random activations");
  cmd->add_option("--norm-weight-spread", o.norm_weight_spread, "Norm weights 1 + spread*randn (0: ones)");
  cmd->add_flag("--time", o.time, "Also time the fast path (cold L2, CUDA events, median of 50)");
}

int run(const RunOptions& o) {
  const std::vector<Case> cases = build_cases(o);
  for (const auto& c : cases) check_config(c);
  const uint64_t seed =
      o.seed ? o.seed : static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  std::string why;
  if (!gk_testkit::cuda_device_available(&why)) {
    if (o.reference == "gpu") throw UsageError(why + ": --reference gpu needs a GPU");
    if (o.time) throw UsageError(why + ": --time needs a GPU");
    return run_cpu_only(o, cases, seed, why);
  }
  gk::Handle handle;
  const gk::Status hs = handle.init();
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
  for (const auto& c : cases) {
    const bool cpu_ref = o.reference == "cpu";
    if (cpu_ref && cpu_reference_macs(c) > 2e10) {
      throw UsageError(c.label + " is too large for the CPU reference; use --reference gpu");
    }
    std::unique_ptr<gk_testkit::Gemma3Problem> gp;
    std::unique_ptr<gk_testkit::AudioProblem> ap;
    if (c.gemma3) gp = std::make_unique<gk_testkit::Gemma3Problem>(c.g);
    else ap = std::make_unique<gk_testkit::AudioProblem>(c.a);
    Row row;
    row.label = c.label;
    for (int r = 0; r < o.rounds; ++r) {
      const uint64_t s = seed + static_cast<uint64_t>(r);
      std::vector<std::pair<std::string, gk_testkit::Judgement>> judged;
      gk::Status st;
      if (gp) {
        st = gp->run_fresh(gemma3_recipe(o, s), handle.get(), stream);
        if (st.ok()) {
          cpu_ref ? gp->run_cpu_reference(stream) : gp->run_gpu_reference(stream);
          judged.emplace_back("out", gp->judge(c.atol, c.rtol, stream));
        }
      } else {
        st = ap->run_fresh(audio_recipe(o, s), handle.get(), stream);
        if (st.ok()) {
          cpu_ref ? ap->run_cpu_reference(stream) : ap->run_gpu_reference(stream);
          const auto js = ap->judge(c.atol, c.rtol, stream);
          judged = {{"q", js[0]}, {"k", js[1]}, {"v", js[2]}};
        }
      }
      if (!st.ok()) {
        std::printf("%s round %d seed %llu: ERROR %s\n", c.label.c_str(), r + 1, static_cast<unsigned long long>(s),
                    st.message().c_str());
        row.pass = false;
        continue;
      }
      for (const auto& [name, j] : judged) {
        std::printf("%s round %d seed %llu %s (atol %g rtol %g, %s reference): %s\n", c.label.c_str(), r + 1,
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
            const gk::Status s = gp ? gp->run(handle.get(), st) : ap->run(handle.get(), st);
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
    if (o.time) std::printf(" %10.1f %10.1f %10.1f", r.time.median_us, r.time.min_us, r.time.max_us);
    std::printf("\n");
    all_pass = all_pass && r.pass;
    time_sum += r.time.median_us;
  }
  if (o.time && rows.size() > 1) {
    std::printf("mean of medians over %zu workloads: %.1f us\n", rows.size(), time_sum / double(rows.size()));
  }
  std::printf("%s\n", all_pass ? "ALL PASS" : "SOME CHECKS FAILED");
  return all_pass ? 0 : 1;
}

}  // namespace gk_cli
