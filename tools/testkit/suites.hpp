// The benchmark suites as data (suites/*.json, embedded at build time) and their parser: NVIDIA's 047 and 054, and
// the project's own (gemma3: the released models' layers, each workload with its own configuration).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gk/gk.h"

namespace gk_testkit {

struct Workload {
  int64_t batch = 0;
  int64_t seq_len = 0;
  double atol = 0.0;
  double rtol = 0.0;
  double nvidia_b200_sol_us = 0.0;  // NVIDIA's published T_SOL for the workload (B200), for reference only
  std::string label;                     // what the workload is beyond (B, S), e.g. "27B local"; may be empty
  std::map<std::string, double> config;  // the suite's constants this workload sets otherwise
};

struct Suite {
  std::string id;        // "047", "054"
  std::string op;        // "gemma3_attention", "audio_qkv"
  std::string title;
  std::map<std::string, double> constants;
  double required_matched_ratio = 0.99;
  std::vector<Workload> workloads;

  double constant(const std::string& name) const;  // throws if absent
  // The workload's value of a constant (its own, else the suite's; `fallback` where neither has it, if given).
  double value(const Workload& w, const std::string& name) const;
  double value(const Workload& w, const std::string& name, double fallback) const;
};

// Parses a suite document; throws std::runtime_error naming the problem (missing key, bad value).
Suite parse_suite(const std::string& json_text);

// The suites built into this binary.
const std::vector<Suite>& builtin_suites();
// Throws std::runtime_error("unknown suite ...") listing the known ids.
const Suite& builtin_suite(const std::string& id);

// Constants: hidden, num_q_heads, num_kv_heads, head_dim, softcap, eps, norm_weight_offset; optional query_scale
// (0: head_dim^-0.5) and window (0: none; causal mode's sliding window).
gk_gemma3_attention_config gemma3_config(const Suite& suite, const Workload& w);
// The tokens already in the key/value cache of every sequence before the workload's seq_len new ones (optional key
// "cached"; 0: no cache, the layer over the whole sequence).
int64_t gemma3_cached(const Suite& suite, const Workload& w);
gk_audio_qkv_config audio_config(const Suite& suite, const Workload& w, gk_precision precision);

}  // namespace gk_testkit
