// What `gk run` and `gk bench` operate on: suites, single workloads or a custom shape, turned into cases
// (an operator configuration with its tolerance).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "gk/gk.h"
#include "problems.hpp"

namespace gk_cli {

struct ShapeOptions {
  std::string op = "gemma3";  // gemma3 | audio
  std::string suite;          // a built-in suite id, or "all"
  std::string workload;       // "B,S": one workload of --suite
  int64_t batch = 1, seq_len = 128;
  int64_t hidden = -1, q_heads = -1, kv_heads = -1, heads = -1, head_dim = 128;  // -1: the suite's constant
  double softcap = -1, eps = -1, norm_offset = -1, query_scale = 0;
  std::string mask = "causal";
  int64_t window = 0;  // gemma3: sliding window (causal mode), 0 = off
  int64_t cached = 0;  // gemma3, custom shape: tokens already in a key/value cache before the S new ones
  int64_t pad = 0;     // ... of which each sequence's first `pad` are left padding (hidden from every query)
  std::string weights = "separate";  // gemma3: separate | packed-qkv | packed-qvk | v-before-k
  std::string precision = "tf32";
  double atol = -1, rtol = -1;  // -1: the suite workload's tolerance (or the suite's loosest)
};

void add_shape_options(CLI::App* cmd, ShapeOptions& o);

struct Case {
  std::string suite_id, suite_title;  // "custom" for a custom shape
  bool gemma3 = true;
  gk_gemma3_attention_config g{};
  gk_audio_qkv_config a{};
  double atol = 0, rtol = 0, required = 0.99;
  gk_testkit::WeightLayout weights = gk_testkit::WeightLayout::kSeparate;
  int64_t batch = 0, seq_len = 0;
  int64_t cached = 0;  // gemma3: tokens already in the key/value cache (a decode or chunked-prefill call); 0: none
  int64_t pad = 0;     // gemma3: each sequence's first `pad` cached tokens are left padding
  std::string tag;  // the workload's own label (e.g. "27B local"), before (B, S)
  std::string label() const {
    return (tag.empty() ? "" : tag + " ") + "B=" + std::to_string(batch) + " S=" + std::to_string(seq_len) +
           (cached > 0 ? " cached=" + std::to_string(cached) : "") + (pad > 0 ? " pad=" + std::to_string(pad) : "");
  }
};

// A suite (or all of them), one workload of a suite, or the custom shape when no suite is named. Every case is
// validated with the library's own checks; problems are reported as UsageError, except a suite's workloads that
// this build does not support (NOT_SUPPORTED), which are left out with a note on stderr.
std::vector<Case> build_cases(const ShapeOptions& o);

gk_precision parse_precision(const std::string& p);

}  // namespace gk_cli
