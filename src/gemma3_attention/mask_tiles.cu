// Additive-mask tile lists: which key tiles each query block of the attention must visit, and which of those
// must read the mask. Two small kernels per call, before the attention:
//   1. classify: one CTA per 64 x 64 tile of the mask: "zero" (every value 0: nothing to add), "dead" (every
//      value clamps to -FLT_MAX in mask_logit2: nothing survives the softmax if the row has any live key) or
//      "mixed"; plus, per row of the tile, whether it has a live value.
//   2. lists: one warp per query block of the kernel's shape (64 or 128 rows, 64- or 128-key tiles): a key tile
//      is kept unless all its 64 x 64 parts are dead; a block with a row that is dead over the whole sequence
//      keeps every tile (that row averages V over all keys, as the reference does).
// The mask is read once (B * S^2 * 2 bytes: 134 MB at S = 8192, ~30 us); the attention then reads only the tiles
// that are neither zero nor skipped.
#include <cuda_bf16.h>

#include <cfloat>
#include <climits>

#include "common/cuda_check.hpp"
#include "common/workspace.hpp"
#include "gemma3_attention/attention_softmax.cuh"
#include "gemma3_attention/kernels.hpp"

namespace gk::gemma3 {

namespace {

constexpr const char* kOp = "gemma3_attention";
constexpr int kPart = 64;  // rows and columns of a classified part
enum : uint8_t { kZero = 0, kDead = 1, kMixed = 2 };

struct Scratch {
  uint8_t* cls = nullptr;       // [B][parts_m][parts_n]
  uint64_t* live_rows = nullptr;  // same index; bit r: row r of the part has a live value
  uint32_t* entries = nullptr;  // [B][query blocks][key tiles], sized for 64-row blocks and 64-key tiles
  int* counts = nullptr;        // [B][query blocks]
  size_t bytes = 0;
};

Scratch carve(void* base, int64_t batch, int64_t seq_len) {
  const int64_t parts = (seq_len + kPart - 1) / kPart;
  detail::WorkspaceCarver w(base);
  Scratch s;
  s.cls = w.take<uint8_t>(batch * parts * parts);
  s.live_rows = w.take<uint64_t>(batch * parts * parts);
  s.entries = w.take<uint32_t>(batch * parts * parts);
  s.counts = w.take<int>(batch * parts);
  s.bytes = w.bytes();
  return s;
}

struct ClassifyParams {
  const __nv_bfloat16* mask;
  int64_t batch_stride, row_stride;
  int seq_len, parts;
  uint8_t* cls;
  uint64_t* live_rows;
};

// grid (parts_n * B, parts_m): 256 threads, thread t reads column t % 64 of rows t / 64 + 4 i (each warp one
// 64-byte row segment per load: coalesced for any row stride or alignment).
__global__ void __launch_bounds__(256) classify_kernel(const ClassifyParams p) {
  const int pn = blockIdx.x % p.parts, b = blockIdx.x / p.parts, pm = blockIdx.y;
  const int col = pn * kPart + threadIdx.x % kPart;
  const int r0 = threadIdx.x / kPart;  // 0..3
  const __nv_bfloat16* rows = p.mask + b * p.batch_stride;
  __shared__ unsigned long long s_live;
  if (threadIdx.x == 0) s_live = 0;
  float v[kPart / 4];
#pragma unroll
  for (int i = 0; i < kPart / 4; ++i) {
    const int row = pm * kPart + r0 + 4 * i;
    // Positions past the sequence end do not exist: they count as zero and not live.
    v[i] = (row < p.seq_len && col < p.seq_len) ? __bfloat162float(rows[int64_t(row) * p.row_stride + col]) : 0.f;
  }
  __syncthreads();  // s_live initialized
  bool all_zero = true, any_live = false;
  unsigned long long live = 0;  // this warp's rows with a live value in its 32 columns
#pragma unroll
  for (int i = 0; i < kPart / 4; ++i) {
    const int row = pm * kPart + r0 + 4 * i;
    const bool exists = row < p.seq_len && col < p.seq_len;
    const bool is_live = exists && mask_logit2(v[i]) > -FLT_MAX;
    all_zero &= v[i] == 0.f;
    any_live |= is_live;
    if (__ballot_sync(0xffffffffu, is_live) != 0u) live |= 1ull << (r0 + 4 * i);
  }
  if (threadIdx.x % 32 == 0 && live != 0) atomicOr(&s_live, live);
  const bool zero = __syncthreads_and(all_zero);
  const bool some_live = __syncthreads_or(any_live);
  if (threadIdx.x == 0) {
    const int64_t idx = (int64_t(b) * p.parts + pm) * p.parts + pn;
    p.cls[idx] = zero ? kZero : (some_live ? kMixed : kDead);
    p.live_rows[idx] = s_live;
  }
}

struct ListParams {
  const uint8_t* cls;
  const uint64_t* live_rows;
  MaskTileLists out;
  int batch, seq_len, parts;
  int m_blocks, n_blocks;  // query blocks and key tiles of the kernel's shape
  int sub_m, sub_n;        // parts per query block (1 or 2) and per key tile (1 or 2)
};

__device__ __forceinline__ unsigned long long warp_or(unsigned long long x) {
#pragma unroll
  for (int d = 16; d > 0; d /= 2) x |= __shfl_xor_sync(0xffffffffu, x, d);
  return x;
}

// One warp per (batch, query block).
__global__ void __launch_bounds__(128) list_kernel(const ListParams p) {
  const int warp = static_cast<int>((int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
  if (warp >= p.batch * p.m_blocks) return;
  const int b = warp / p.m_blocks, mb = warp % p.m_blocks;
  const int64_t b_parts = int64_t(b) * p.parts;

  bool dead_row = false;
  for (int h = 0; h < p.sub_m; ++h) {
    const int pm = mb * p.sub_m + h;
    if (pm >= p.parts) break;
    unsigned long long live = 0;
    for (int pn = lane; pn < p.parts; pn += 32) live |= p.live_rows[(b_parts + pm) * p.parts + pn];
    live = warp_or(live);
    const int rows = min(kPart, p.seq_len - pm * kPart);
    const unsigned long long valid = rows == kPart ? ~0ull : (1ull << rows) - 1;
    dead_row |= (live & valid) != valid;
  }

  int count = 0;
  uint32_t* entries = p.out.entries + int64_t(warp) * p.out.stride;
  for (int base = 0; base < p.n_blocks; base += 32) {
    const int nb = base + lane;
    bool keep = false;
    uint32_t bits = 0;
    if (nb < p.n_blocks) {
      for (int h = 0; h < p.sub_m; ++h) {
        const int pm = mb * p.sub_m + h;
        if (pm >= p.parts) break;
        for (int c = 0; c < p.sub_n; ++c) {
          const int pn = nb * p.sub_n + c;
          if (pn >= p.parts) break;
          const uint8_t cls = p.cls[(b_parts + pm) * p.parts + pn];
          keep |= cls != kDead;
          if (cls != kZero) bits |= 1u << h;
        }
      }
      keep |= dead_row;
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, keep);
    if (keep) entries[count + __popc(ballot & ((1u << lane) - 1u))] = (uint32_t(nb) << 2) | bits;
    count += __popc(ballot);
  }
  if (lane == 0) p.out.counts[warp] = count;
}

}  // namespace

size_t mask_tile_scratch_bytes(int64_t batch, int64_t seq_len) { return carve(nullptr, batch, seq_len).bytes; }

Status build_mask_tiles(AttentionParams* p, int block_m, int block_n, cudaStream_t stream) {
  if (block_m % kPart != 0 || block_n % kPart != 0 || block_m > 2 * kPart || block_n > 2 * kPart) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: no mask tile lists for %d x %d tiles", kOp, block_m, block_n);
  }
  const int64_t parts = (int64_t(p->seq_len) + kPart - 1) / kPart;
  if (parts > 65535) {
    return detail::error(GK_STATUS_NOT_SUPPORTED,
                         "%s: an additive mask supports seq_len up to %d (got %d); use mask mode causal or none", kOp,
                         65535 * kPart, p->seq_len);
  }
  if (p->mask_scratch == nullptr || p->mask_scratch_bytes < mask_tile_scratch_bytes(p->batch, p->seq_len)) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: mask tile scratch missing or too small", kOp);
  }
  const Scratch s = carve(p->mask_scratch, p->batch, p->seq_len);

  ClassifyParams cp{p->mask, p->mask_batch_stride, p->mask_row_stride, p->seq_len, static_cast<int>(parts), s.cls,
                    s.live_rows};
  // parts * batch <= (S / 64 + 1) * batch, far below 2^31 under the layer's batch * S < 2^31.
  classify_kernel<<<dim3(static_cast<unsigned>(parts * p->batch), static_cast<unsigned>(parts)), 256, 0, stream>>>(cp);
  GK_RETURN_IF_ERROR(detail::check_launch(kOp, "mask classification launch"));

  ListParams lp{};
  lp.cls = s.cls;
  lp.live_rows = s.live_rows;
  lp.batch = p->batch;
  lp.seq_len = p->seq_len;
  lp.parts = static_cast<int>(parts);
  lp.m_blocks = (p->seq_len + block_m - 1) / block_m;
  lp.n_blocks = (p->seq_len + block_n - 1) / block_n;
  lp.sub_m = block_m / kPart;
  lp.sub_n = block_n / kPart;
  lp.out = {s.entries, s.counts, lp.n_blocks};
  const int64_t warps = int64_t(p->batch) * lp.m_blocks;
  list_kernel<<<static_cast<unsigned>((warps + 3) / 4), 128, 0, stream>>>(lp);
  GK_RETURN_IF_ERROR(detail::check_launch(kOp, "mask tile list launch"));
  p->tiles = lp.out;
  return Status::Ok();
}

}  // namespace gk::gemma3
