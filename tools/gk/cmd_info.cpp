// gk info: the device this process sees and the supported configuration matrix.
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "device_buffer.hpp"
#include "device_info.hpp"
#include "metrics.hpp"
#include "gk/gk.h"

namespace gk_cli {

void add_info(CLI::App& app) { app.add_subcommand("info", "Print the CUDA device and the supported configurations"); }

int info() {
  std::printf("gemma-kernels %d.%d.%d\n", GK_VERSION_MAJOR, GK_VERSION_MINOR, GK_VERSION_PATCH);
  std::string why;
  if (!gk_testkit::cuda_device_available(&why)) {
    std::printf("device: %s\n", why.c_str());
  } else {
    const auto d = gk_testkit::query_device();
    std::printf("device: %s, compute capability %d.%d, %d SMs\n", d.name.c_str(), d.cc_major, d.cc_minor, d.sm_count);
    std::printf("  memory %.1f GiB, L2 %.1f MiB, max SM clock %d MHz, memory clock %d MHz\n", d.memory_gib, d.l2_mib,
                d.sm_clock_max_mhz, d.mem_clock_mhz);
    std::printf("  driver %s, runtime %s\n", d.driver.c_str(), d.runtime.c_str());
    if (d.cc_major != 9 || d.cc_minor != 0) {
      std::printf("  note: this build targets sm_90a (Hopper); its kernels will not load on this device\n");
    }
    const auto peaks = gk_testkit::peaks_for_device(d.name);
    std::printf("  speed of light (%s): %.0f TFLOP/s bf16, %.0f TFLOP/s tf32, %.0f GB/s\n", peaks.source.c_str(),
                peaks.bf16_tflops, peaks.tf32_tflops, peaks.gbps);
  }
  std::printf(
      "\nsupported matrix\n"
      "  gemma3_attention (bf16): head_dim 128 or 256 (256 on the sm80-class kernels); hidden a multiple of 64;\n"
      "    num_q_heads = g * num_kv_heads, g in 1..8; batch >= 1, seq_len 1..16777216 with batch*seq_len < 2^31;\n"
      "    softcap >= 0 (0 = off); any eps, norm weight offset and query scale; masks: causal (tensor not read),\n"
      "    causal with a sliding window, additive bf16 [B,1,S,S], none\n"
      "  audio_qkv (fp32): head_dim 128; hidden a multiple of 64; num_heads >= 1; precision tf32 (tensor cores;\n"
      "    v's inputs rounded to nearest tf32, q's and k's truncated) or exact (3xTF32 tensor cores with fp32\n"
      "    promotion; fp32 cuBLAS past 8388480 rows)\n"
      "  target: sm_90a (H100, H200)\n");
  return 0;
}

}  // namespace gk_cli
