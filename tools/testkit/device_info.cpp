#include "device_info.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "device_buffer.hpp"

namespace gk_testkit {

namespace {
std::string version(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }
}  // namespace

DeviceInfo query_device() {
  int dev = 0, driver = 0, runtime = 0, clock_khz = 0, mem_khz = 0;
  GK_TK_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  GK_TK_CUDA(cudaGetDeviceProperties(&p, dev));
  GK_TK_CUDA(cudaDriverGetVersion(&driver));
  GK_TK_CUDA(cudaRuntimeGetVersion(&runtime));
  GK_TK_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  GK_TK_CUDA(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev));
  DeviceInfo d;
  d.name = p.name;
  d.sm_count = p.multiProcessorCount;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_clock_max_mhz = clock_khz / 1000;
  d.mem_clock_mhz = mem_khz / 1000;
  d.memory_gib = double(p.totalGlobalMem) / 1073741824.0;
  d.l2_mib = double(p.l2CacheSize) / 1048576.0;
  d.driver = version(driver);
  d.runtime = version(runtime);
  return d;
}

}  // namespace gk_testkit
