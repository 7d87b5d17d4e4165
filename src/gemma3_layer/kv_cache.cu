// The new tokens' k and v, as the q|k|v step left them in the packed rows (k normalized and rotated), into a key/value
// cache after each sequence's cached tokens: one thread per 16 bytes. The host checked that the caller's bound on
// the cached lengths leaves room; a device length past it is clamped as the attention clamps it, inside the cache.
#include <cuda_bf16.h>

#include "common/kernel_launch.hpp"
#include "gemma3_layer/kv_cache.hpp"

namespace gk::gemma3 {

namespace {

__global__ void cache_write_kernel(const CacheWriteParams p) {
  const int chunks = p.head_dim / 8;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t total = int64_t(p.batch) * p.seq_len * p.kv_heads * 2 * chunks;
  if (idx >= total) return;
  const int c = static_cast<int>(idx % chunks);
  int64_t rest = idx / chunks;
  const int kind = static_cast<int>(rest % 2);  // 0: k, 1: v
  rest /= 2;
  const int h = static_cast<int>(rest % p.kv_heads);
  rest /= p.kv_heads;
  const int s = static_cast<int>(rest % p.seq_len);
  const int b = static_cast<int>(rest / p.seq_len);
  // The attention's clamp (MaskPolicy::visit): a length past the host's bound still lands inside the cache, where
  // the attention then reads it.
  const int64_t p0 = max(int64_t(0), min(int64_t(p.lens[b]), int64_t(p.max_len) - p.seq_len));
  const int64_t pos = p0 + s;
  const __nv_bfloat16* src =
      p.qkv + (int64_t(b) * p.seq_len + s) * p.row_stride + (kind ? p.v_col : p.k_col) + h * p.head_dim + c * 8;
  __nv_bfloat16* dst = (kind ? p.v_cache : p.k_cache) + ((int64_t(b) * p.kv_heads + h) * p.max_len + pos) * p.head_dim +
                       c * 8;
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
}

}  // namespace

Status prepare_cache_write(const CacheWriteParams& p, detail::KernelLaunch* out) {
  if (p.head_dim % 8 != 0 || p.batch < 1 || p.seq_len < 1 || p.kv_heads < 1) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "gemma3_attention: a cache write the kernel cannot take");
  }
  const int64_t total = int64_t(p.batch) * p.seq_len * p.kv_heads * 2 * (p.head_dim / 8);
  const int64_t blocks = (total + 255) / 256;
  if (blocks > INT32_MAX) {
    return detail::error(GK_STATUS_INVALID_ARGUMENT, "gemma3_attention: %lld new k/v chunks exceed the cache write's grid",
                         static_cast<long long>(total));
  }
  *out = detail::KernelLaunch("key/value cache write launch", cache_write_kernel,
                              {dim3(static_cast<unsigned>(blocks)), 256}, p);
  return Status::Ok();
}

}  // namespace gk::gemma3
