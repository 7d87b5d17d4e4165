// Heads of the packed q|k|v rows out into tensors laid out [B, heads, capacity, D]: the new tokens' k and v into a
// key/value cache after each sequence's cached tokens, or q, k and v into plain outputs (head_scatter.cu).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "common/kernel_launch.hpp"
#include "gk/gk.hpp"

namespace gk::gemma3 {

inline constexpr int kMaxScatterParts = 3;

struct HeadScatterPart {
  int col = 0;                     // the part's first column in a packed row (elements)
  int heads = 0;
  __nv_bfloat16* dst = nullptr;    // [B, heads, capacity, head_dim]
  int capacity = 0;                // tokens per (sequence, head) in dst
  bool at_lens = false;            // token s of sequence b goes to lens[b] + s (a cache), else to s
};

struct HeadScatterParams {
  const __nv_bfloat16* qkv = nullptr;  // the packed rows of the new tokens, [B * S][row_stride]
  int64_t row_stride = 0;
  HeadScatterPart part[kMaxScatterParts];
  int parts = 0;
  const int* lens = nullptr;           // [B] on the device: the cached lengths (parts with at_lens)
  int batch = 0, seq_len = 0, head_dim = 0;
};

Status prepare_head_scatter(const char* op, const HeadScatterParams& p, detail::KernelLaunch* out);

}  // namespace gk::gemma3
