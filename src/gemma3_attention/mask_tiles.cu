// Additive-mask tile lists: which key tiles each query block of the attention must visit, and how each applies
// the mask. Two small kernels per call, before the attention:
//   1. classify: the mask in 64 x 64 parts: "zero" (every value 0: nothing to add), "dead" (every value clamps to
//      -FLT_MAX in mask_logit2: nothing there survives the softmax of a row with any live key), "bits" (only 0 and
//      dead values) or "values"; per part and row, a 64-bit word of live columns (what a "bits" tile reads instead
//      of the mask: 8 bytes per row and part instead of 128).
//   2. lists: one warp per query block of the kernel's shape (64 or 128 rows, 64- or 128-key tiles): a key tile
//      is kept unless all its parts are dead; a block with a row that is dead over the whole sequence keeps every
//      tile (that row averages V over all keys, as the reference does).
// The mask is read once, in 16-byte pieces whatever its alignment (B * S^2 * 2 bytes: 134 MB at S = 8192).
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
constexpr int kPart = 64;          // rows and columns of a classified part
constexpr int kGroupParts = 4;     // parts per classify CTA, side by side
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
  int64_t elements;           // B * S * S
  int seq_len, parts, groups;  // groups: ceil(parts / kGroupParts)
  uint8_t* cls;
  uint64_t* live_rows;
  uint64_t* bits;
};

// A 16-byte piece that crosses an end of the tensor, element by element (zeros outside). Out of line: it runs at
// most twice per call, and inlined at every load site it bloats the kernel.
__device__ __noinline__ uint4 load_piece_edge(uintptr_t addr, uintptr_t lo, uintptr_t hi) {
  uint32_t w[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t x = 0;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const uintptr_t a = addr + 4 * j + 2 * e;
      if (a >= lo && a + 2 <= hi) x |= uint32_t(*reinterpret_cast<const uint16_t*>(a)) << (16 * e);
    }
    w[j] = x;
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// grid (groups * B, parts_m), 256 threads: the CTA classifies kGroupParts parts side by side (64 rows x 256
// columns); warp w takes rows w, w + 8, ... A row's 256 columns are read as the aligned 16-byte pieces that cover
// them (33 at most: lane 0 takes a 33rd), elements outside the row's range ignored; a piece that would cross either
// end of the tensor is read element by element.
__global__ void __launch_bounds__(256) classify_kernel(const ClassifyParams p) {
  const int group = blockIdx.x % p.groups, b = blockIdx.x / p.groups, pm = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c0 = group * kGroupParts * kPart, c1 = min(c0 + kGroupParts * kPart, p.seq_len);
  const int n_parts = (c1 - c0 + kPart - 1) / kPart;
  __shared__ unsigned s_flags[kGroupParts];             // bit 0: nonzero, 1: live, 2: neither 0 nor dead
  __shared__ unsigned long long s_live[kGroupParts];    // rows with a live value
  if (threadIdx.x < kGroupParts) {
    s_flags[threadIdx.x] = 0;
    s_live[threadIdx.x] = 0;
  }
  __syncthreads();
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p.mask), hi = lo + uintptr_t(p.elements) * 2;
  // A row's 16-byte piece: vector load where it lies inside the tensor, else element by element (zeros outside).
  const auto load_piece = [&](uintptr_t addr) {
    if (addr >= lo && addr + 16 <= hi) return *reinterpret_cast<const uint4*>(addr);
    return load_piece_edge(addr, lo, hi);
  };
  const auto row_ptr = [&](int r) { return p.mask + (int64_t(b) * p.seq_len + pm * kPart + r) * p.seq_len; };
  const auto first_piece = [&](int r) { return reinterpret_cast<uintptr_t>(row_ptr(r) + c0) & ~uintptr_t(15); };

  // All of the warp's loads first, parked in shared memory (a row's 33rd piece, when its range is misaligned, is
  // read with the row): eight 16-byte loads per thread in flight instead of one, and the processing loop stays
  // rolled up (unrolled, the kernel's code outgrew the instruction cache: ~15 us of fixed cost per call).
  constexpr int kRowsPerWarp = kPart / 8;
  const int rows_here = min(kPart, p.seq_len - pm * kPart);
  __shared__ uint4 s_raw[8][kRowsPerWarp][32];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = warp + 8 * i;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < rows_here) {
      const uintptr_t addr = first_piece(r) + 16u * lane;
      if (addr < reinterpret_cast<uintptr_t>(row_ptr(r) + c1)) v = load_piece(addr);
    }
    s_raw[warp][i][lane] = v;
  }
  __syncwarp();

  unsigned flags[kGroupParts] = {};
  unsigned long long live_rows[kGroupParts] = {};
#pragma unroll 1
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = warp + 8 * i;
    if (r >= rows_here) break;  // warp-uniform
    const uintptr_t row_addr = reinterpret_cast<uintptr_t>(row_ptr(r)), first = first_piece(r);
    const uintptr_t end = reinterpret_cast<uintptr_t>(row_ptr(r) + c1);
    unsigned long long words[kGroupParts] = {};
    unsigned part_flags[kGroupParts] = {};
    // Folds one piece into the per-part flags (bit 0: nonzero, 1: live, 2: live and nonzero) and live words.
    const auto fold = [&](uint4 v, uintptr_t addr) {
      const int rel0 = static_cast<int>((static_cast<int64_t>(addr) - static_cast<int64_t>(row_addr)) / 2) - c0;
      const uint32_t packed[4] = {v.x, v.y, v.z, v.w};
      // A piece spans at most two parts: the one of its first in-range element, and the next from element `split`.
      const int part = max(rel0, 0) / kPart, split = (part + 1) * kPart - rel0;
      unsigned f_lo = 0, f_hi = 0, live8 = 0;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float m = __uint_as_float((packed[e / 2] >> (16 * (e % 2))) << 16);  // bf16 -> fp32 is a shift
        const bool live = mask_logit2(m) > -FLT_MAX, valid = rel0 + e >= 0 && rel0 + e < c1 - c0;
        const unsigned f = valid ? (m != 0.f ? 1u : 0u) | (live ? 2u : 0u) | ((m != 0.f && live) ? 4u : 0u) : 0u;
        if (e < split) {
          f_lo |= f;
        } else {
          f_hi |= f;
        }
        live8 |= (valid && live ? 1u : 0u) << e;
      }
      const unsigned long long lo_bits = split >= 8 ? live8 : live8 & ((1u << split) - 1u);
      const unsigned long long lo_word =
          rel0 >= part * kPart ? lo_bits << (rel0 - part * kPart) : lo_bits >> (part * kPart - rel0);
      const unsigned long long hi_word = split < 8 ? static_cast<unsigned long long>(live8 >> split) : 0ull;
      if (split >= 8) f_hi = 0;
      // Selected by masks rather than branches, which the compiler would fold into a dynamic index (local memory).
#pragma unroll
      for (int q = 0; q < kGroupParts; ++q) {
        const unsigned is_lo = 0u - static_cast<unsigned>(q == part), is_hi = 0u - static_cast<unsigned>(q == part + 1);
        const unsigned long long lo64 = 0ull - static_cast<unsigned long long>(q == part);
        const unsigned long long hi64 = 0ull - static_cast<unsigned long long>(q == part + 1);
        part_flags[q] |= (f_lo & is_lo) | (f_hi & is_hi);
        words[q] |= (lo_word & lo64) | (hi_word & hi64);
      }
    };
    fold(s_raw[warp][i][lane], first + 16u * lane);
    if (lane == 0 && first + 16u * 32 < end) fold(load_piece(first + 16u * 32), first + 16u * 32);
#pragma unroll
    for (int q = 0; q < kGroupParts; ++q) {
      if (q >= n_parts) continue;  // warp-uniform
      const unsigned long long w =
          __reduce_or_sync(0xffffffffu, static_cast<unsigned>(words[q])) |
          static_cast<unsigned long long>(__reduce_or_sync(0xffffffffu, static_cast<unsigned>(words[q] >> 32))) << 32;
      const unsigned f = __reduce_or_sync(0xffffffffu, part_flags[q]);
      if (lane == 0) {
        p.bits[((int64_t(b) * p.parts + pm) * p.parts + group * kGroupParts + q) * kPart + r] = w;
        flags[q] |= f;
        if (w != 0) live_rows[q] |= 1ull << r;
      }
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int q = 0; q < kGroupParts; ++q) {
      if (q < n_parts) {
        atomicOr(&s_flags[q], flags[q]);
        atomicOr(&s_live[q], live_rows[q]);
      }
    }
  }
  __syncthreads();
  if (threadIdx.x < n_parts) {
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
  if (parts > 65535) {
    return detail::error(GK_STATUS_NOT_SUPPORTED,
                         "%s: an additive mask supports seq_len up to %d (got %d); use mask mode causal or none", kOp,
                         65535 * kPart, p->seq_len);
  }
  if (p->mask_scratch == nullptr || p->mask_scratch_bytes < mask_tile_scratch_bytes(p->batch, p->seq_len)) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: mask tile scratch missing or too small", kOp);
  }
  const Scratch s = carve(p->mask_scratch, p->batch, p->seq_len);

  if (p->mask_row_stride != p->seq_len || p->mask_batch_stride != int64_t(p->seq_len) * p->seq_len) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: the mask tile classification takes a contiguous mask", kOp);
  }
  ClassifyParams cp{};
  cp.mask = p->mask;
  cp.elements = int64_t(p->batch) * p->seq_len * p->seq_len;
  cp.seq_len = p->seq_len;
  cp.parts = static_cast<int>(parts);
  cp.groups = static_cast<int>((parts + kGroupParts - 1) / kGroupParts);
  cp.cls = s.cls;
  cp.live_rows = s.live_rows;
  cp.bits = s.bits;
  // groups * batch <= (S / 256 + 1) * batch, far below 2^31 under the layer's batch * S < 2^31.
  classify_kernel<<<dim3(static_cast<unsigned>(cp.groups * int64_t(p->batch)), static_cast<unsigned>(parts)), 256, 0,
                    stream>>>(cp);
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
  lp.out = {s.entries, s.counts, lp.n_blocks, s.bits, lp.parts};
  const int64_t warps = int64_t(p->batch) * lp.m_blocks;
  list_kernel<<<static_cast<unsigned>((warps + 3) / 4), 128, 0, stream>>>(lp);
  GK_RETURN_IF_ERROR(detail::check_launch(kOp, "mask tile list launch"));
  p->tiles = lp.out;
  return Status::Ok();
}

}  // namespace gk::gemma3
