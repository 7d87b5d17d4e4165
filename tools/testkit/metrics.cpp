#include "metrics.hpp"

#include <algorithm>

namespace gk_testkit {

namespace {

// A cached call: per head, the (query, key) pairs of S new queries at positions cached .. cached + S - 1, each seeing
// the keys up to itself (causal; within `window` if set) or all cached + S (no mask); and the cache's keys read.
Cost gemma3_cached_cost(const gk_gemma3_attention_config& c, int64_t cached, double proj) {
  const double B = double(c.batch), S = double(c.seq_len), H = double(c.hidden), D = double(c.head_dim);
  const double Hq = double(c.num_q_heads), Hkv = double(c.num_kv_heads), M = B * S, L = double(cached);
  const bool causal = c.mask_mode == GK_MASK_CAUSAL;
  const double W = causal && c.sliding_window > 0 ? double(c.sliding_window) : L + S;
  double pairs = 0;
  for (int64_t i = 0; i < c.seq_len; ++i) pairs += causal ? std::min(W, L + double(i) + 1) : L + S;
  const double read_keys = causal ? std::min(L, std::max(0.0, W - 1)) : L;  // cached keys some new query sees
  Cost k;
  k.flops = proj + 4 * B * Hq * pairs * D;
  k.flops_full = proj + 4 * B * Hq * S * (L + S) * D;
  const double bf16 = 2;
  const double inputs = M * H + 2 * M * D + (Hq + 2 * Hkv) * D * H + H * Hq * D + 2 * D;
  const double cache = 2 * B * Hkv * D * (read_keys + S);  // k and v: the visible cached ones read, the new written
  k.bytes = bf16 * (inputs + cache + M * H);
  k.bytes_full = bf16 * (inputs + 2 * B * Hkv * D * (L + S) + M * H);
  return k;
}

}  // namespace

Cost gemma3_cost(const gk_gemma3_attention_config& c, int64_t cached) {
  const double B = double(c.batch), S = double(c.seq_len), H = double(c.hidden), D = double(c.head_dim);
  const double Hq = double(c.num_q_heads), Hkv = double(c.num_kv_heads), M = B * S;
  const double proj = 2 * M * H * (Hq + 2 * Hkv) * D + 2 * M * Hq * D * H;
  if (cached > 0) return gemma3_cached_cost(c, cached, proj);
  Cost k;
  // Visible (query, key) pairs per head: all; causal, S (S + 1) / 2; a window W < S, the band's W (W + 1) / 2 + (S - W) W.
  // Two FLOPs per multiply-add in Q K^T and in P V.
  double pairs = S * S;
  if (c.mask_mode == GK_MASK_CAUSAL) {
    const double W = c.sliding_window > 0 && double(c.sliding_window) < S ? double(c.sliding_window) : S;
    pairs = W * (W + 1) / 2 + (S - W) * W;
  }
  k.flops = proj + 4 * B * Hq * pairs * D;
  k.flops_full = proj + 4 * B * Hq * S * S * D;
  const double bf16 = 2;
  const double inputs = M * H + 2 * M * D + (Hq + 2 * Hkv) * D * H + H * Hq * D + 2 * D;
  const double mask = B * S * S;
  k.bytes = bf16 * (inputs + (c.mask_mode == GK_MASK_ADDITIVE ? mask : 0) + M * H);
  k.bytes_full = bf16 * (inputs + mask + M * H);
  return k;
}

Cost audio_cost(const gk_audio_qkv_config& c) {
  const double M = double(c.batch) * double(c.seq_len), H = double(c.hidden);
  const double N = double(c.num_heads) * double(c.head_dim);
  Cost k;
  k.tf32 = true;
  k.flops = k.flops_full = 2 * M * H * 3 * N;
  k.bytes = k.bytes_full = 4 * (M * H + 3 * N * H + 2 * double(c.head_dim) + 3 * M * N);
  return k;
}

Peaks peaks_for_device(const std::string& name) {
  // Dense (no sparsity) tensor-core rates and HBM bandwidth from NVIDIA's datasheets.
  struct Row {
    const char* match;
    const char* source;
    double bf16, tf32, gbps;
  };
  static const Row rows[] = {
      {"H200", "datasheet: NVIDIA H200 SXM", 989, 494, 4800},
      {"H100 PCIe", "datasheet: NVIDIA H100 PCIe", 756, 378, 2000},
      {"H100 NVL", "datasheet: NVIDIA H100 NVL", 835, 418, 3900},
      {"H100", "datasheet: NVIDIA H100 SXM", 989, 494, 3350},
  };
  for (const auto& r : rows) {
    if (name.find(r.match) != std::string::npos) return {r.source, r.bf16, r.tf32, r.gbps};
  }
  return {"datasheet: NVIDIA H200 SXM (device '" + name + "' not in the table)", 989, 494, 4800};
}

Floor floor_of(const Cost& cost, const Peaks& p, bool full) {
  const double rate = (cost.tf32 ? p.tf32_tflops : p.bf16_tflops) * 1e12;
  Floor f;
  f.compute_us = (full ? cost.flops_full : cost.flops) / rate * 1e6;
  f.memory_us = (full ? cost.bytes_full : cost.bytes) / (p.gbps * 1e9) * 1e6;
  return f;
}

}  // namespace gk_testkit
