#include "cases.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "commands.hpp"
#include "gk/gk.hpp"
#include "suites.hpp"

namespace gk_cli {

namespace {

using gk_testkit::Suite;
using gk_testkit::Workload;

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

gk_mask_mode parse_mask(const std::string& m) {
  return m == "additive" ? GK_MASK_ADDITIVE : m == "none" ? GK_MASK_NONE : GK_MASK_CAUSAL;
}

Case suite_case(const Suite& s, const Workload& w, const ShapeOptions& o) {
  Case c;
  c.suite_id = s.id;
  c.suite_title = s.title;
  c.gemma3 = s.op == "gemma3_attention";
  if (c.gemma3) {
    c.g = gk_testkit::gemma3_config(s, w);
    c.cached = gk_testkit::gemma3_cached(s, w);
    // The suite's mask is causal; --mask additive passes it as a tensor (what SOL-ExecBench's harness does).
    c.g.mask_mode = parse_mask(o.mask);
    if (c.g.mask_mode == GK_MASK_ADDITIVE && c.cached > 0) {
      throw UsageError("--mask additive: suite " + s.id + "'s workloads have a key/value cache, which takes causal "
                       "mode");
    }
    if (c.g.mask_mode != GK_MASK_CAUSAL && c.g.sliding_window > 0) {
      throw UsageError("--mask " + o.mask + ": suite " + s.id + "'s sliding-window workloads (" + w.label +
                       ") run in causal mode only");
    }
    if (c.g.mask_mode == GK_MASK_NONE) {
      throw UsageError("--mask none would change the suite's workload (its mask is causal); use a custom shape: "
                       "--op gemma3 -b B -s S --mask none");
    }
    if (c.g.mask_mode != GK_MASK_CAUSAL) c.suite_title += " [mask mode: " + o.mask + "]";
    if (o.window > 0) {  // a window on every workload (the models suite's local layers have their own)
      c.g.sliding_window = o.window;
      c.suite_title += " [sliding window: " + std::to_string(o.window) + "]";
    }
    // Not the suites' layout either (SOL-ExecBench's harness allocates the three weights apart).
    if (o.weights != "separate") c.suite_title += " [weights: " + o.weights + "]";
  } else {
    c.a = gk_testkit::audio_config(s, w, parse_precision(o.precision));
  }
  c.atol = o.atol >= 0 ? o.atol : w.atol;
  c.rtol = o.rtol >= 0 ? o.rtol : w.rtol;
  c.required = s.required_matched_ratio;
  c.batch = w.batch;
  c.seq_len = w.seq_len;
  c.tag = w.label;
  return c;
}

Case custom_case(const ShapeOptions& o) {
  Case c;
  c.suite_id = "custom";
  c.batch = o.batch;
  c.seq_len = o.seq_len;
  const Suite& s = gk_testkit::builtin_suite(o.op == "gemma3" ? "047" : "054");
  c.suite_title = "custom shape with the constants of suite " + s.id;
  const Workload shape{o.batch, o.seq_len, 0, 0, 0};
  if (o.op == "gemma3") {
    c.g = gk_testkit::gemma3_config(s, shape);
    if (o.hidden > 0) c.g.hidden = o.hidden;
    if (o.q_heads > 0) c.g.num_q_heads = o.q_heads;
    if (o.kv_heads > 0) c.g.num_kv_heads = o.kv_heads;
    c.g.head_dim = o.head_dim;
    if (o.softcap >= 0) c.g.softcap = float(o.softcap);
    if (o.eps >= 0) c.g.rms_norm_eps = float(o.eps);
    if (o.norm_offset >= 0) c.g.norm_weight_offset = float(o.norm_offset);
    c.g.query_scale = float(o.query_scale);
    c.g.mask_mode = parse_mask(o.mask);
    c.g.sliding_window = o.window;
    c.cached = o.cached;
    c.pad = o.pad;
    if (c.cached > 0 && c.g.mask_mode == GK_MASK_ADDITIVE) {
      throw UsageError("--cached: a key/value cache takes causal mode (or none), not an additive mask");
    }
    if (c.pad > c.cached) throw UsageError("--pad: at most the --cached tokens can be left padding");
  } else {
    if (o.cached > 0 || o.pad > 0) throw UsageError("--cached and --pad apply to the gemma3 operator only");
    c.gemma3 = false;
    c.a = gk_testkit::audio_config(s, shape, parse_precision(o.precision));
    if (o.hidden > 0) c.a.hidden = o.hidden;
    if (o.heads > 0) c.a.num_heads = o.heads;
    c.a.head_dim = o.head_dim;
    if (o.eps >= 0) c.a.eps = float(o.eps);
  }
  const Workload* w = find_workload(s, o.batch, o.seq_len);
  c.atol = o.atol >= 0 ? o.atol : (w ? w->atol : loosest(s, true));
  c.rtol = o.rtol >= 0 ? o.rtol : (w ? w->rtol : loosest(s, false));
  c.required = s.required_matched_ratio;
  return c;
}

std::vector<Case> build(const ShapeOptions& o) {
  if (o.suite.empty()) return {custom_case(o)};
  if (o.cached > 0 || o.pad > 0) {
    throw UsageError("--cached and --pad describe a custom shape (--op gemma3 -b B -s S), not a suite's");
  }
  std::vector<const Suite*> suites;
  if (o.suite == "all") {
    for (const auto& s : gk_testkit::builtin_suites()) suites.push_back(&s);
  } else {
    suites.push_back(&gk_testkit::builtin_suite(o.suite));
  }
  int64_t wb = 0, ws = 0;
  if (!o.workload.empty()) {
    if (o.suite == "all") throw UsageError("--workload selects a workload of one --suite");
    if (std::sscanf(o.workload.c_str(), "%" SCNd64 ",%" SCNd64, &wb, &ws) != 2) {
      throw UsageError("--workload must be B,S (got '" + o.workload + "')");
    }
  }
  std::vector<Case> cases;
  for (const Suite* s : suites) {
    for (const auto& w : s->workloads) {
      if (!o.workload.empty() && (w.batch != wb || w.seq_len != ws)) continue;
      cases.push_back(suite_case(*s, w, o));
    }
  }
  if (cases.empty()) throw UsageError("suite " + o.suite + " has no workload " + o.workload);
  return cases;
}

}  // namespace

gk_precision parse_precision(const std::string& p) {
  if (p == "tf32") return GK_PRECISION_TF32;
  if (p == "exact") return GK_PRECISION_EXACT;
  throw UsageError("--precision must be tf32 or exact (got '" + p + "')");
}

void add_shape_options(CLI::App* cmd, ShapeOptions& o) {
  cmd->add_option("--op", o.op, "Operator of a custom shape: gemma3 | audio")->check(CLI::IsMember({"gemma3", "audio"}));
  cmd->add_option("-b,--batch", o.batch, "Batch size (custom shape)");
  cmd->add_option("-s,--seq-len", o.seq_len, "Sequence length (custom shape)");
  cmd->add_option("--hidden", o.hidden, "Hidden size (default: the suite's)");
  cmd->add_option("--q-heads", o.q_heads, "gemma3: query heads (default 24)");
  cmd->add_option("--kv-heads", o.kv_heads, "gemma3: key/value heads (default 8)");
  cmd->add_option("--heads", o.heads, "audio: heads (default 8)");
  cmd->add_option("--head-dim", o.head_dim, "Head dimension");
  cmd->add_option("--softcap", o.softcap, "gemma3: logit softcap, 0 = off (default 50)");
  cmd->add_option("--eps", o.eps, "RMSNorm epsilon (default 1e-6)");
  cmd->add_option("--norm-offset", o.norm_offset, "gemma3: RMSNorm weight offset (default 1)");
  cmd->add_option("--query-scale", o.query_scale, "gemma3: score scale, 0 = head_dim^-0.5");
  cmd->add_option("--mask", o.mask, "gemma3: causal | additive | none (with --suite: causal, or additive to pass the suite's causal mask as a tensor)")
      ->check(CLI::IsMember({"causal", "additive", "none"}));
  cmd->add_option("--window", o.window,
                  "gemma3: sliding window in keys, causal mode (query i sees key j iff j <= i and i - j < window); "
                  "0 = off")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cached", o.cached,
                  "gemma3, custom shape: tokens already in a key/value cache (every sequence) before the S new ones; "
                  "the call writes their k and v after them and attends over both (chunked prefill, decode)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--pad", o.pad,
                  "gemma3, with --cached: each sequence's first N cached tokens are left padding (cache_starts), "
                  "hidden from every query")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--weights", o.weights,
                  "gemma3: where the q, k and v weights lie: separate allocations (the suites'), packed-qkv (one "
                  "allocation [Wq; Wk; Wv], as a fused weight's views), packed-qvk ([Wq; Wv; Wk]) or v-before-k "
                  "(q's apart, [Wv; Wk])")
      ->check(CLI::IsMember({"separate", "packed-qkv", "packed-qvk", "v-before-k"}));
  cmd->add_option("--precision", o.precision, "audio: tf32 | exact")->check(CLI::IsMember({"tf32", "exact"}));
  cmd->add_option("--workload", o.workload, "One workload of --suite, as B,S");
  cmd->add_option("--atol", o.atol, "Absolute tolerance (default: the suite workload's)");
  cmd->add_option("--rtol", o.rtol, "Relative tolerance (default: the suite workload's)");
}

std::vector<Case> build_cases(const ShapeOptions& o) {
  std::vector<Case> cases;
  try {
    cases = build(o);
  } catch (const UsageError&) {
    throw;
  } catch (const std::runtime_error& e) {  // an unknown suite id
    throw UsageError(e.what());
  }
  const auto weights = o.weights == "packed-qkv"   ? gk_testkit::WeightLayout::kPackedQkv
                       : o.weights == "packed-qvk" ? gk_testkit::WeightLayout::kPackedQvk
                       : o.weights == "v-before-k" ? gk_testkit::WeightLayout::kVBeforeK
                                                   : gk_testkit::WeightLayout::kSeparate;
  // Like --mask: the gemma3 cases take it, the audio ones (whose weights it does not describe) ignore it.
  bool any_gemma3 = false;
  for (auto& c : cases) {
    if (c.gemma3) c.weights = weights;
    any_gemma3 = any_gemma3 || c.gemma3;
  }
  if (!any_gemma3 && weights != gk_testkit::WeightLayout::kSeparate) {
    throw UsageError("--weights applies to the gemma3 operator only");
  }
  std::vector<Case> runnable;
  std::map<std::pair<std::string, std::string>, int> left_out;  // by suite and reason
  for (auto& c : cases) {
    size_t bytes = 0;
    const gk::Status s = c.gemma3 ? gk::gemma3_attention_workspace_size(c.g, &bytes)
                                  : gk::audio_qkv_workspace_size(c.a, &bytes);
    if (s.code() == GK_STATUS_NOT_SUPPORTED && c.suite_id != "custom") {
      ++left_out[{c.suite_id, s.message()}];
      continue;
    }
    if (!s.ok()) throw UsageError(s.message());
    runnable.push_back(std::move(c));
  }
  for (const auto& [why, n] : left_out) {
    std::fprintf(stderr, "gk: suite %s: %d workload(s) left out, not supported by this build: %s\n",
                 why.first.c_str(), n, why.second.c_str());
  }
  if (runnable.empty()) throw UsageError("no workload to run: this build supports none of them");
  return runnable;
}

}  // namespace gk_cli
