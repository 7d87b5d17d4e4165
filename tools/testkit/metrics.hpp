// What a workload must compute and move (the two numbers behind every speed-of-light figure), the peak rates
// of the GPU it runs on, and the resulting floors. Host-only.
#pragma once

#include <string>

#include "gk/gk.h"

namespace gk_testkit {

struct Cost {
  double flops = 0;       // causal-aware: half of QK^T and PV under a causal mask (2*B*Hq*S*(S+1)*D)
  double bytes = 0;       // every input read once + every output written once; the mask is not read (causal)
  double flops_full = 0;  // NVIDIA's T_SOL convention: full S^2 attention
  double bytes_full = 0;  // ... plus the [B,1,S,S] bf16 mask read
  bool tf32 = false;      // the FLOPs run at the tf32 rate (audio operator)
};

// cached > 0: the layer for c.seq_len new tokens per sequence after `cached` ones in a key/value cache: the visible
// cached keys (and values) are read, the new tokens' written, and each new query attends over cached + new keys.
Cost gemma3_cost(const gk_gemma3_attention_config& c, int64_t cached = 0);
Cost audio_cost(const gk_audio_qkv_config& c);

struct Peaks {
  std::string source;  // "datasheet: NVIDIA H200 SXM", "user"
  double bf16_tflops = 0;
  double tf32_tflops = 0;
  double gbps = 0;  // GB/s (1e9 bytes)
};

// Dense datasheet peaks for the device name as the driver reports it; an unknown name gets the H200's with a
// source string that says so.
Peaks peaks_for_device(const std::string& device_name);

struct Floor {
  double compute_us = 0, memory_us = 0;
  double us() const { return compute_us > memory_us ? compute_us : memory_us; }
  bool memory_bound() const { return memory_us >= compute_us; }
};

Floor floor_of(const Cost& cost, const Peaks& peaks, bool full = false);

}  // namespace gk_testkit
