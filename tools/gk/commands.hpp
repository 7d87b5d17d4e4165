// Subcommands of the gk command-line tool.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "cases.hpp"

namespace gk_cli {

// A request that cannot be run as asked (bad option value, invalid shape, needs a GPU): exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RunOptions {
  ShapeOptions shape;
  std::string reference = "auto";       // auto | gpu | cpu
  std::string mask_pattern = "causal";  // causal | padded (contents of the additive mask)
  uint64_t seed = 0;                    // 0: derived from the clock (printed)
  int rounds = 1;
  double activation_scale = 1.0, norm_weight_spread = 0.0;
  bool time = false;
};

void add_run(CLI::App& app, RunOptions& opts);
int run(const RunOptions& opts);

struct BenchOptions {
  ShapeOptions shape;
  std::string timer = "cupti";  // cupti | events | both
  int rounds = 3, warmup = 10, iterations = 50, input_sets = 3;
  std::string json;
  double peak_tflops = 0, peak_tf32_tflops = 0, peak_gbps = 0;  // 0: the device's datasheet values
  uint64_t seed = 0;
  bool breakdown = false;
  bool custom = false;  // --op given: a custom shape instead of suites
  bool prepared_weights = false;  // audio: weights prepared once before timing (gk_audio_qkv_prepare)
};

void add_bench(CLI::App& app, BenchOptions& opts);
int bench(const BenchOptions& opts);

void add_info(CLI::App& app);
int info();

uint64_t clock_seed();

}  // namespace gk_cli
