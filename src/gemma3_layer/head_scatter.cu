// One thread per 16 bytes of a head row. A cache position comes from the device length clamped as the attention
// clamps it (MaskPolicy::visit): a length past the host's bound still lands inside the cache, never beyond it.
#include <cuda_bf16.h>

#include "common/device/kv_cache.cuh"
#include "common/kernel_launch.hpp"
#include "common/status_util.hpp"
#include "gemma3_layer/head_scatter.hpp"

namespace gk::gemma3 {

namespace {

__global__ void head_scatter_kernel(const HeadScatterParams p) {
  const int chunks = p.head_dim / 8;
  int heads = 0;
#pragma unroll
  for (int i = 0; i < kMaxScatterParts; ++i) heads += i < p.parts ? p.part[i].heads : 0;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(p.batch) * p.seq_len * heads * chunks) return;
  const int c = static_cast<int>(idx % chunks);
  int64_t rest = idx / chunks;
  int h = static_cast<int>(rest % heads);
  rest /= heads;
  const int s = static_cast<int>(rest % p.seq_len);
  const int b = static_cast<int>(rest / p.seq_len);
  // The part this head belongs to, and its index there (unrolled: no local-memory copy of the parameters).
  HeadScatterPart part = p.part[0];
#pragma unroll
  for (int i = 1; i < kMaxScatterParts; ++i) {
    if (h >= part.heads && i < p.parts) {
      h -= part.heads;
      part = p.part[i];
    }
  }
  int64_t pos = s;
  if (part.at_lens) pos += device::cached_tokens(p.lens[b], part.capacity, p.seq_len);
  const __nv_bfloat16* src = p.qkv + (int64_t(b) * p.seq_len + s) * p.row_stride + part.col + h * p.head_dim + c * 8;
  __nv_bfloat16* dst = part.dst + ((int64_t(b) * part.heads + h) * part.capacity + pos) * p.head_dim + c * 8;
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
}

}  // namespace

Status prepare_head_scatter(const char* op, const HeadScatterParams& p, detail::KernelLaunch* out) {
  int64_t heads = 0;
  bool ok = p.head_dim % 8 == 0 && p.batch >= 1 && p.seq_len >= 1 && p.parts >= 1 && p.parts <= kMaxScatterParts;
  for (int i = 0; ok && i < p.parts; ++i) {
    const HeadScatterPart& part = p.part[i];
    ok = part.heads >= 1 && part.dst != nullptr && part.capacity >= p.seq_len && (!part.at_lens || p.lens != nullptr);
    heads += part.heads;
  }
  if (!ok) return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: a head scatter the kernel cannot take", op);
  const int64_t total = int64_t(p.batch) * p.seq_len * heads * (p.head_dim / 8);
  const int64_t blocks = (total + 255) / 256;
  if (blocks > INT32_MAX) {
    return detail::error(GK_STATUS_INVALID_ARGUMENT, "%s: %lld new head chunks exceed the scatter's grid", op,
                         static_cast<long long>(total));
  }
  *out = detail::KernelLaunch("head scatter launch", head_scatter_kernel, {dim3(static_cast<unsigned>(blocks)), 256}, p);
  return Status::Ok();
}

}  // namespace gk::gemma3
