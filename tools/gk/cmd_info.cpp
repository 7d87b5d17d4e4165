// gk info: the device this process sees and the supported configuration matrix.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "commands.hpp"
#include "device_buffer.hpp"
#include "gk/gk.h"

namespace gk_cli {

void add_info(CLI::App& app) { app.add_subcommand("info", "Print the CUDA device and the supported configurations"); }

int info() {
  std::printf("gemma-kernels %d.%d.%d\n", GK_VERSION_MAJOR, GK_VERSION_MINOR, GK_VERSION_PATCH);
  std::string why;
  if (!gk_testkit::cuda_device_available(&why)) {
    std::printf("device: %s\n", why.c_str());
  } else {
    int dev = 0, driver = 0, runtime = 0, clock_khz = 0, mem_clock_khz = 0;
    cudaGetDevice(&dev);
    cudaDeviceProp p{};
    GK_TK_CUDA(cudaGetDeviceProperties(&p, dev));
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev);
    cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev);
    std::printf("device %d: %s, compute capability %d.%d, %d SMs\n", dev, p.name, p.major, p.minor,
                p.multiProcessorCount);
    std::printf("  memory %.1f GiB, L2 %.1f MiB, shared memory per SM %zu KiB (per block opt-in %zu KiB)\n",
                p.totalGlobalMem / 1073741824.0, p.l2CacheSize / 1048576.0, p.sharedMemPerMultiprocessor / 1024,
                p.sharedMemPerBlockOptin / 1024);
    std::printf("  max SM clock %d MHz, memory clock %d MHz\n", clock_khz / 1000, mem_clock_khz / 1000);
    std::printf("  driver %d.%d, runtime %d.%d\n", driver / 1000, (driver % 1000) / 10, runtime / 1000,
                (runtime % 1000) / 10);
    if (p.major != 9 || p.minor != 0) {
      std::printf("  note: this build targets sm_90a (Hopper); kernels will not load on this device\n");
    }
  }
  std::printf(
      "\nsupported matrix\n"
      "  gemma3_attention (bf16): head_dim 128; hidden a multiple of 64; num_q_heads = g * num_kv_heads, g in 1..8;\n"
      "    batch >= 1, seq_len 1..16777216 with batch*seq_len < 2^31; softcap >= 0 (0 = off); any eps,\n"
      "    norm weight offset and query scale; masks: causal (tensor not read), additive bf16 [B,1,S,S], none\n"
      "    not yet: head_dim 256, sliding-window masks\n"
      "  audio_qkv (fp32): head_dim 128; hidden a multiple of 64; num_heads >= 1; precision tf32 (inputs rounded\n"
      "    to nearest tf32, tensor cores) or exact (fp32 FMA)\n"
      "  target: sm_90a (H100, H200)\n");
  return 0;
}

}  // namespace gk_cli
