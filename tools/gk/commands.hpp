// Subcommands of the gk command-line tool.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace gk_cli {

// A request that cannot be run as asked (bad option value, invalid shape, needs a GPU): exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RunOptions {
  std::string op = "gemma3";  // gemma3 | audio
  std::string suite;          // run every workload of a built-in suite
  int64_t batch = 1, seq_len = 128;
  int64_t hidden = -1, q_heads = -1, kv_heads = -1, heads = -1, head_dim = 128;  // -1: the suite's constant
  double softcap = -1, eps = -1, norm_offset = -1, query_scale = 0;
  std::string mask = "causal";           // causal | additive | none
  std::string mask_pattern = "causal";   // causal | padded (contents of the additive mask)
  std::string precision = "tf32";        // tf32 | exact
  std::string reference = "auto";        // auto | gpu | cpu
  uint64_t seed = 0;                     // 0: derived from the clock (printed)
  int rounds = 1;
  double atol = -1, rtol = -1;           // -1: the suite workload's tolerance (or the suite's loosest)
  double activation_scale = 1.0, norm_weight_spread = 0.0;
  bool time = false;
};

void add_run(CLI::App& app, RunOptions& opts);
int run(const RunOptions& opts);

void add_info(CLI::App& app);
int info();

}  // namespace gk_cli
