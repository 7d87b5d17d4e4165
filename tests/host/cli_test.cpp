// The gk command line: exit statuses and messages a script can rely on.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>

#include "gk/gk.h"

namespace {

struct Result {
  int status;
  std::string output;  // stdout and stderr
};

Result gk(const std::string& args) {
  const char* env = std::getenv("GK_CLI");  // overrides the path compiled in (for a build run elsewhere)
  const std::string cmd = std::string(env ? env : GK_CLI_PATH) + " " + args + " 2>&1";
  Result r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int raw = pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

// A usage error: exit status 2, and the message where one is given. Returns the run for further checks.
Result usage_error(const std::string& args, const std::string& message = "") {
  const Result r = gk(args);
  EXPECT_EQ(r.status, 2) << args;
  if (!message.empty()) EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  return r;
}

TEST(Cli, HelpAndInfo) {
  const auto help = gk("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.output.find("run"), std::string::npos);
  EXPECT_NE(help.output.find("info"), std::string::npos);
  const auto info = gk("info");
  EXPECT_EQ(info.status, 0) << info.output;
  EXPECT_NE(info.output.find("supported matrix"), std::string::npos);
  EXPECT_NE(gk("").status, 0);  // a subcommand is required
}

TEST(Cli, UsageErrorsExitTwoWithAClearMessage) {
  usage_error("run --suite 999", "unknown suite '999' (known: 047, 054, decode, gemma3)");
  usage_error("run -s 0", "seq_len must be >= 1");
  usage_error("run --hidden 100", "hidden must be a positive multiple of 64");
  usage_error("run --op conv");
  usage_error("run --rounds 0");
  usage_error("run --op gemma3 -b 1 -s 8 --cached 4 --pad 5", "at most the --cached tokens can be left padding");
  usage_error("run --suite 047 --cached 8", "describe a custom shape");
  // The models suite: every model's layers are built (none left out); without a GPU the CPU reference computes the
  // 1B model's global and local layers (their windows differ, so do their outputs) and stops at the 4B's size.
  const auto r = gk("run --suite gemma3 --workload 1,1024 --reference cpu --seed 3");
  EXPECT_EQ(r.output.find("left out"), std::string::npos) << r.output;
  const auto mean_of = [&](const std::string& label) {
    const size_t at = r.output.find(label + " B=1 S=1024");
    const size_t m = at == std::string::npos ? at : r.output.find("mean |out| ", at);
    return m == std::string::npos ? std::string() : r.output.substr(m + 11, 8);
  };
  if (r.output.find("computing the CPU reference only") != std::string::npos) {
    EXPECT_FALSE(mean_of("1B global").empty()) << r.output;
    EXPECT_NE(mean_of("1B global"), mean_of("1B local")) << r.output;
    EXPECT_NE(r.output.find("gemma3 4B global B=1 S=1024 is too large for the CPU reference"), std::string::npos)
        << r.output;
  }
}

TEST(Cli, BenchErrors) {
  usage_error("bench --suite 999", "unknown suite '999'");
  usage_error("bench --op gemma3 -b 2 -s 0", "seq_len must be >= 1");
  usage_error("bench --suite 047 --workload 3,3", "has no workload 3,3");
  usage_error("bench --timer stopwatch");
  const Result r = usage_error("bench --suite 047 --mask none", "--mask none would change the suite's workload");
  if (r.output.find("gk bench needs a CUDA GPU") == std::string::npos) return;  // a GPU is present
  usage_error("bench --suite 054", "gk bench needs a CUDA GPU");
}

TEST(Cli, RunsASmallShapeWithOrWithoutAGpu) {
  // With a GPU: fast path against the GPU reference, exit 0. Without: the CPU reference on the same generated
  // inputs, and exit 3, "nothing checked" (never the pass status).
  const auto r = gk("run --op gemma3 -b 2 -s 19 --hidden 256 --q-heads 4 --kv-heads 2 --seed 7");
  const bool gpu = r.output.find("computing the CPU reference only") == std::string::npos;
  EXPECT_EQ(r.status, gpu ? 0 : 3) << r.output;
  if (gpu) EXPECT_NE(r.output.find("ALL PASS"), std::string::npos) << r.output;
  else EXPECT_NE(r.output.find("NOTHING CHECKED"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("NON-FINITE"), std::string::npos) << r.output;
  const auto a = gk("run --op audio -b 1 -s 5 --hidden 128 --heads 2 --precision exact --seed 7");
  EXPECT_EQ(a.status, gpu ? 0 : 3) << a.output;
  // A chunk after a left-padded cache: each sequence's first 7 keys hidden (both references and the library).
  const auto c = gk("run --op gemma3 -b 2 -s 40 --cached 50 --pad 7 --hidden 256 --q-heads 4 --kv-heads 2 --seed 7");
  EXPECT_EQ(c.status, gpu ? 0 : 3) << c.output;
  EXPECT_EQ(c.output.find("NON-FINITE"), std::string::npos) << c.output;
}

TEST(Cli, VersionIsTheHeadersAndTheLibrarys) {
  const auto r = gk("--version");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(std::string("gk ") + GK_VERSION_STRING + " (libgk " + GK_VERSION_STRING + ", ABI "),
            std::string::npos)
      << r.output;
}

}  // namespace
