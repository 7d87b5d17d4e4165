// NVML through dlopen: the handful of entry points clock_sampler.hpp needs, declared here with NVML's C ABI.
#include "clock_sampler.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace gk_testkit {

namespace {

using NvmlReturn = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

struct Nvml {
  bool ok = false;
  NvmlReturn (*by_pci_bus_id)(const char*, void**) = nullptr;
  NvmlReturn (*clock_info)(void*, int, unsigned*) = nullptr;
  NvmlReturn (*event_reasons)(void*, unsigned long long*) = nullptr;

  // Opened once per process and kept open: the sampler may run for every workload of a suite.
  static const Nvml& get() {
    static const Nvml n = open();
    return n;
  }

 private:
  static Nvml open() {
    Nvml n;
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return n;
    const auto init = reinterpret_cast<NvmlReturn (*)()>(dlsym(lib, "nvmlInit_v2"));
    n.by_pci_bus_id = reinterpret_cast<decltype(n.by_pci_bus_id)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.clock_info = reinterpret_cast<decltype(n.clock_info)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    // Renamed from "throttle reasons" in newer drivers; same signature and bits.
    void* reasons = dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons");
    if (reasons == nullptr) reasons = dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    n.event_reasons = reinterpret_cast<decltype(n.event_reasons)>(reasons);
    n.ok = init != nullptr && n.by_pci_bus_id != nullptr && n.clock_info != nullptr && n.event_reasons != nullptr &&
           init() == 0;
    return n;
  }
};

}  // namespace

ClockSampler::ClockSampler(int cuda_device, int period_ms) : period_ms_(period_ms) {
  const Nvml& n = Nvml::get();
  char bus_id[32] = {};
  if (!n.ok || cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), cuda_device) != cudaSuccess) return;
  void* dev = nullptr;
  if (n.by_pci_bus_id(bus_id, &dev) == 0) device_ = dev;
}

ClockSampler::~ClockSampler() { stop(); }

void ClockSampler::start() {
  if (running_ || device_ == nullptr || !enabled()) return;
  samples_.clear();
  running_ = true;
  try {
    thread_ = std::thread([this] {
      const Nvml& n = Nvml::get();
      while (running_) {
        unsigned mhz = 0;
        unsigned long long reasons = 0;
        if (n.clock_info(device_, kNvmlClockSm, &mhz) == 0 && n.event_reasons(device_, &reasons) == 0) {
          samples_.emplace_back(mhz, static_cast<uint64_t>(reasons));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(period_ms_));
      }
    });
  } catch (const std::system_error&) {
    running_ = false;  // no thread: no samples, the stats stay invalid; the benchmark goes on
  }
}

ClockStats ClockSampler::stop() {
  if (thread_.joinable()) {
    running_ = false;
    thread_.join();
  }
  return summarize_clock_samples(samples_);
}

bool ClockSampler::enabled() {
  const char* v = std::getenv("GK_BENCH_CLOCKS");
  return v == nullptr || std::strcmp(v, "off") != 0;
}

}  // namespace gk_testkit
