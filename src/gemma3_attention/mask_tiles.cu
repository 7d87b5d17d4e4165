// Additive-mask tile lists: which key tiles each query block of the attention must visit, and how each applies
// the mask. Two small kernels per call, before the attention:
//   1. classify: the mask in 64 x 64 parts: "zero" (every value 0: nothing to add), "dead" (every value clamps to
//      -FLT_MAX in mask_logit2: nothing there survives the softmax of a row with any live key), "bits" (only 0 and
//      dead values) or "values"; per part and row, a 64-bit word of live columns (what a "bits" tile reads instead
//      of the mask: 8 bytes per row and part instead of 128).
//   2. lists: one warp per query block of the kernel's shape (64 or 128 rows, 64- or 128-key tiles): a key tile
//      is kept unless all its parts are dead; a block with a row that is dead over the whole sequence keeps every
//      tile (that row averages V over all keys, as the reference does).
// The mask is read once (B * S^2 * 2 bytes: 134 MB per batch element at S = 8192).
#include <cuda_bf16.h>

#include <cfloat>

#include "common/cuda_check.hpp"
#include "common/workspace.hpp"
#include "gemma3_attention/attention_softmax.cuh"
#include "gemma3_attention/kernels.hpp"

namespace gk::gemma3 {

namespace {

constexpr const char* kOp = "gemma3_attention";
constexpr int kPart = 64;          // rows and columns of a classified part
constexpr int kGroupParts = 4;     // parts per classify CTA, side by side (two warps each)
enum : uint8_t { kZero = 0, kDead = 1, kBits = 2, kValues = 3 };

struct Scratch {
  uint8_t* cls = nullptr;         // [B][parts_m][parts_n]
  uint64_t* live_rows = nullptr;  // same index; bit r: row r of the part has a live value
  uint64_t* bits = nullptr;       // [B][parts_m][parts_n][64]: live columns of each row
  uint32_t* entries = nullptr;    // [B][query blocks][key tiles], sized for 64-row blocks and 64-key tiles
  int* counts = nullptr;          // [B][query blocks]
  size_t bytes = 0;
};

Scratch carve(void* base, int64_t batch, int64_t seq_len) {
  const int64_t parts = (seq_len + kPart - 1) / kPart;
  detail::WorkspaceCarver w(base);
  Scratch s;
  s.cls = w.take<uint8_t>(batch * parts * parts);
  s.live_rows = w.take<uint64_t>(batch * parts * parts);
  s.bits = w.take<uint64_t>(batch * parts * parts * kPart);
  s.entries = w.take<uint32_t>(batch * parts * parts);
  s.counts = w.take<int>(batch * parts);
  s.bytes = w.bytes();
  return s;
}

struct ClassifyParams {
  const __nv_bfloat16* mask;  // contiguous [B][S][S]
  int seq_len, parts, groups;  // groups: ceil(parts / kGroupParts)
  uint8_t* cls;
  uint64_t* live_rows;
  uint64_t* bits;
};

// grid (groups * B, parts_m), 256 threads: the CTA classifies kGroupParts parts side by side (64 rows x 256
// columns). Warps 2q and 2q + 1 own part q, rows 0-31 and 32-63; lane l owns its columns 2l and 2l + 1, so two
// ballots over the warp are a row's live word: even columns in the low half, odd columns in the high half (the
// layout add_mask_bits reads). Each thread issues all of its loads before using any. With kPairs (even S,
// 4-byte aligned mask) a column pair is one 4-byte load (128 bytes per warp instruction); otherwise two 2-byte
// loads, as rows of an odd-length mask start anywhere. (A thread per column, 2-byte loads, reached ~0.9 TB/s.)
template <bool kPairs>
__global__ void __launch_bounds__(256) classify_kernel(const ClassifyParams p) {
  constexpr int kCols = kGroupParts * kPart, kRows = kPart / 2;
  const int group = blockIdx.x % p.groups, b = blockIdx.x / p.groups, pm = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, part = warp / 2, row0 = (warp % 2) * kRows;
  const int col = group * kCols + part * kPart + 2 * lane;  // this thread's even column
  const int rows = min(kPart, p.seq_len - pm * kPart) - row0;  // of this warp's 32 (may be <= 0)
  const bool ok0 = col < p.seq_len, ok1 = col + 1 < p.seq_len;
  __shared__ unsigned s_flags[kGroupParts];           // bit 0: nonzero, 1: live, 2: live and nonzero
  __shared__ unsigned long long s_live[kGroupParts];  // rows with a live value
  if (threadIdx.x < kGroupParts) {
    s_flags[threadIdx.x] = 0;
    s_live[threadIdx.x] = 0;
  }
  const uint16_t* src =
      reinterpret_cast<const uint16_t*>(p.mask) + (int64_t(b) * p.seq_len + pm * kPart + row0) * p.seq_len + col;
  uint32_t v[kRows];  // the pair: even column in the low 16 bits
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const uint16_t* at = src + int64_t(r) * p.seq_len;
    if (kPairs) {
      v[r] = (ok0 && r < rows) ? *reinterpret_cast<const uint32_t*>(at) : 0u;
    } else {
      const uint32_t lo = (ok0 && r < rows) ? at[0] : 0u, hi = (ok1 && r < rows) ? at[1] : 0u;
      v[r] = lo | hi << 16;
    }
  }
  __syncthreads();  // shared flags initialized

  unsigned flags = 0;
  unsigned long long live_rows = 0;
  const int part_n = group * kGroupParts + part;
  const bool part_exists = part_n < p.parts;
  uint64_t* words = p.bits + ((int64_t(b) * p.parts + pm) * p.parts + part_n) * kPart + row0;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    bool live[2];
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const float m = __uint_as_float(c == 0 ? v[r] << 16 : v[r] & 0xffff0000u);  // bf16 -> fp32 is a shift
      const bool exists = (c == 0 ? ok0 : ok1) && r < rows;
      live[c] = exists && mask_logit2(m) > -FLT_MAX;
      const bool nonzero = exists && m != 0.f;
      flags |= (nonzero ? 1u : 0u) | (live[c] ? 2u : 0u) | (nonzero && live[c] ? 4u : 0u);
    }
    const unsigned even = __ballot_sync(0xffffffffu, live[0]), odd = __ballot_sync(0xffffffffu, live[1]);
    if (lane == 0 && part_exists && r < rows) words[r] = uint64_t(odd) << 32 | even;
    live_rows |= static_cast<unsigned long long>((even | odd) != 0u) << (row0 + r);
  }
  flags = __reduce_or_sync(0xffffffffu, flags);
  if (lane == 0 && part_exists) {
    atomicOr(&s_flags[part], flags);
    atomicOr(&s_live[part], live_rows);
  }
  __syncthreads();
  if (threadIdx.x < kGroupParts && group * kGroupParts + static_cast<int>(threadIdx.x) < p.parts) {
    const int q = threadIdx.x;
    const unsigned f = s_flags[q];
    const int64_t idx = (int64_t(b) * p.parts + pm) * p.parts + group * kGroupParts + q;
    p.cls[idx] = !(f & 1u) ? kZero : !(f & 2u) ? kDead : !(f & 4u) ? kBits : kValues;
    p.live_rows[idx] = s_live[q];
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
    live = __reduce_or_sync(0xffffffffu, static_cast<unsigned>(live)) |
           static_cast<unsigned long long>(__reduce_or_sync(0xffffffffu, static_cast<unsigned>(live >> 32))) << 32;
    const int rows = min(kPart, p.seq_len - pm * kPart);
    const unsigned long long valid = rows == kPart ? ~0ull : (1ull << rows) - 1;
    dead_row |= (live & valid) != valid;
  }

  int count = 0;
  uint32_t* entries = p.out.entries + int64_t(warp) * p.out.stride;
  for (int base = 0; base < p.n_blocks; base += 32) {
    const int nb = base + lane;
    bool keep = false;
    uint32_t apply = 0;
    if (nb < p.n_blocks) {
      for (int h = 0; h < p.sub_m; ++h) {
        const int pm = mb * p.sub_m + h;
        if (pm >= p.parts) break;
        uint32_t a = kMaskNone;
        for (int c = 0; c < p.sub_n; ++c) {
          const int pn = nb * p.sub_n + c;
          if (pn >= p.parts) break;
          const uint8_t cls = p.cls[(b_parts + pm) * p.parts + pn];
          keep |= cls != kDead;
          a = max(a, cls == kZero ? kMaskNone : cls == kValues ? kMaskValues : kMaskBits);
        }
        apply |= a << (2 * h);
      }
      keep |= dead_row;
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, keep);
    if (keep) entries[count + __popc(ballot & ((1u << lane) - 1u))] = (uint32_t(nb) << 4) | apply;
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
  const int m_blocks = (p->seq_len + block_m - 1) / block_m;
  // The config check rejects longer sequences; the kernels index the lists by the grid's query blocks.
  if (p->seq_len > kMaxAdditiveMaskSeqLen || p->num_m_blocks != m_blocks) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: mask tile lists for seq_len %d, %d query blocks of %d rows",
                         kOp, p->seq_len, p->num_m_blocks, block_m);
  }
  if (p->mask_row_stride != p->seq_len || p->mask_batch_stride != int64_t(p->seq_len) * p->seq_len) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: the mask tile classification takes a contiguous mask", kOp);
  }
  if (p->mask_scratch == nullptr || p->mask_scratch_bytes < mask_tile_scratch_bytes(p->batch, p->seq_len)) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: mask tile scratch missing or too small", kOp);
  }
  const Scratch s = carve(p->mask_scratch, p->batch, p->seq_len);
  ClassifyParams cp{};
  cp.mask = p->mask;
  cp.seq_len = p->seq_len;
  cp.parts = static_cast<int>(parts);
  cp.groups = static_cast<int>((parts + kGroupParts - 1) / kGroupParts);
  cp.cls = s.cls;
  cp.live_rows = s.live_rows;
  cp.bits = s.bits;
  // groups * batch <= (S / 256 + 1) * batch, far below 2^31 under the layer's batch * S < 2^31.
  const dim3 grid(static_cast<unsigned>(cp.groups * int64_t(p->batch)), static_cast<unsigned>(parts));
  // The condition under which the kernels load mask pairs as words (launch_attention sets it) is this one's too.
  if (p->mask_pairs) {
    classify_kernel<true><<<grid, 256, 0, stream>>>(cp);
  } else {
    classify_kernel<false><<<grid, 256, 0, stream>>>(cp);
  }
  GK_RETURN_IF_ERROR(detail::check_launch(kOp, "mask classification launch"));

  ListParams lp{};
  lp.cls = s.cls;
  lp.live_rows = s.live_rows;
  lp.batch = p->batch;
  lp.seq_len = p->seq_len;
  lp.parts = static_cast<int>(parts);
  lp.m_blocks = m_blocks;
  lp.n_blocks = (p->seq_len + block_n - 1) / block_n;
  lp.sub_m = block_m / kPart;
  lp.sub_n = block_n / kPart;
  lp.out = {s.entries, s.counts, lp.n_blocks, s.bits, lp.parts};
  const int64_t warps = int64_t(p->batch) * lp.m_blocks;
  list_kernel<<<static_cast<unsigned>((warps + 3) / 4), 128, 0, stream>>>(lp);
  GK_RETURN_IF_ERROR(detail::check_launch(kOp, "mask tile list launch"));
  p->tiles = lp.out;
  return Status::Ok();
}

}  // namespace gk::gemma3
