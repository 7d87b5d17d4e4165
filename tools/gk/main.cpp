// gk: run and inspect the gemma-kernels operators from the command line.
#include <cstdio>
#include <exception>
#include <string>

#include "commands.hpp"
#include "gk/gk.h"

int main(int argc, char** argv) {
  CLI::App app{"gk: Hopper CUDA kernels for the Gemma3 attention layer and the Gemma3n audio QKV projection"};
  app.require_subcommand(1);
  // The tool's version and the loaded library's (they differ only when another libgk is found first).
  app.set_version_flag("--version", std::string("gk ") + GK_VERSION_STRING + " (libgk " + gk_version() + ", ABI " +
                                        std::to_string(gk_abi_version()) + ")");
  gk_cli::RunOptions run_opts;
  gk_cli::add_run(app, run_opts);
  gk_cli::BenchOptions bench_opts;
  gk_cli::add_bench(app, bench_opts);
  gk_cli::add_info(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (app.got_subcommand("run")) return gk_cli::run(run_opts);
    if (app.got_subcommand("bench")) return gk_cli::bench(bench_opts);
    if (app.got_subcommand("info")) return gk_cli::info();
  } catch (const gk_cli::UsageError& e) {
    std::fprintf(stderr, "gk: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gk: error: %s\n", e.what());
    return 1;
  }
  return 2;
}
