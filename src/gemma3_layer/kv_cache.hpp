// Writing the new tokens' k and v into a key/value cache (kv_cache.cu).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "common/kernel_launch.hpp"
#include "gk/gk.hpp"

namespace gk::gemma3 {

struct CacheWriteParams {
  const __nv_bfloat16* qkv;  // the packed q|k|v rows of the new tokens, [B * S][row_stride]
  int64_t row_stride;
  int k_col, v_col;          // where k's and v's first heads start in a row (elements)
  __nv_bfloat16* k_cache;    // [B, kv_heads, max_len, head_dim]
  __nv_bfloat16* v_cache;
  const int* lens;           // [B]: the cached lengths, on the device
  int batch, seq_len, kv_heads, head_dim, max_len;
};

Status prepare_cache_write(const CacheWriteParams& p, detail::KernelLaunch* out);

}  // namespace gk::gemma3
