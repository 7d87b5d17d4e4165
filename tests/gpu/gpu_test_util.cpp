#include "gpu_test_util.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "device_buffer.hpp"
#include "env_overrides.hpp"

namespace gk_test {

namespace {

struct Env {
  bool available = false;
  std::string why;
  gk::Handle handle;
  cudaStream_t stream = nullptr;
};

Env& env() {
  static Env* e = [] {
    auto* x = new Env;
    x->available = gk_testkit::cuda_device_available(&x->why);
    if (x->available) {
      cudaDeviceProp p{};
      cudaGetDeviceProperties(&p, 0);
      if (p.major != 9) {
        x->available = false;
        x->why = std::string("device ") + p.name + " is not sm_90 (Hopper); the kernels are built for sm_90a";
      }
    }
    if (x->available) {
      gk::Status s = x->handle.init();
      if (s.ok()) s = gk_testkit::apply_env_overrides(x->handle.get());
      if (!s.ok()) {
        x->available = false;
        x->why = s.message();
      }
      cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking);
    }
    return x;
  }();
  return *e;
}

std::atomic<uint64_t>& seed_counter() {
  static std::atomic<uint64_t> s = [] {
    const char* fixed = std::getenv("GK_TEST_SEED");
    const uint64_t seed = fixed ? std::strtoull(fixed, nullptr, 10)
                                : static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
    std::printf("[ seeds    ] first seed %llu (set GK_TEST_SEED to repeat)\n", static_cast<unsigned long long>(seed));
    return seed;
  }();
  return s;
}

}  // namespace

void GpuTest::SetUp() {
  if (!env().available) GTEST_SKIP() << env().why;
}

gk_handle_t GpuTest::handle() { return env().handle.get(); }
cudaStream_t GpuTest::stream() { return env().stream; }
uint64_t GpuTest::next_seed() { return seed_counter().fetch_add(1); }

void report(const std::string& what, uint64_t seed, const gk_testkit::Judgement& j, double required) {
  std::printf("[ result   ] %-40s seed %-20llu %s\n", what.c_str(), static_cast<unsigned long long>(seed),
              j.summary(required).c_str());
  std::fflush(stdout);
}

}  // namespace gk_test
