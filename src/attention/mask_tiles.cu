// Additive-mask tile lists: which key tiles each query block of the attention must visit, and how each applies
// the mask. Two small kernels per call, before the attention:
//   1. classify: the mask in 64 x 64 parts: "zero" (every value 0: nothing to add), "dead" (every value clamps to
//      -FLT_MAX in mask_logit2: nothing there survives the softmax of a row with any live key), "bits" (only 0 and
//      dead values) or "values"; per part and row, a 64-bit word of live columns (what a "bits" tile reads instead
//      of the mask: 8 bytes per row and part instead of 128).
//   2. lists: one warp per query block of the kernel's shape (64 or 128 rows, 64- or 128-key tiles): a key tile
//      is kept unless all its parts are dead; a block with a row that is dead over the whole sequence keeps every
//      tile (that row averages V over all keys, as the reference does), and its bits tiles are marked
//      kMaskBitsDeadRow (dead scores -FLT_MAX, not -inf: params.hpp).
// The mask is read once (B * S^2 * 2 bytes: 134 MB per batch element at S = 8192).
//
// Launched programmatically (behind the split q|k|v kernel or the norm/RoPE pass, which let their dependents launch
// early), the classification runs beside that kernel instead of after it: it reads only the mask, which no kernel of
// the layer writes, and writes only its scratch, which only this call's list kernel and attention read. (That the
// previous call's attention no longer reads the scratch rests on the layer's first kernel being launched plainly.)
// It still carries the dependency: its first CTA waits for that kernel before it exits, so the classification's
// completion, which the list kernel waits for, as the attention waits for the list kernel's, implies that kernel's.
#include <cuda_bf16.h>

#include <cfloat>

#include "common/kernel_launch.hpp"
#include "common/cuda_check.hpp"
#include "common/device/sm90_primitives.cuh"
#include "common/workspace.hpp"
#include "attention/softmax.cuh"
#include "attention/attention.hpp"
#include "attention/mask_live.hpp"

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
// layout load_mask_bits reads). Each thread issues all of its loads before using any. With kPairs (even S,
// 4-byte aligned mask) a column pair is one 4-byte load (128 bytes per warp instruction); otherwise two 2-byte
// loads, as rows of an odd-length mask start anywhere. (A thread per column, 2-byte loads, reached ~0.9 TB/s.)
//
// The previous form was bound by its instructions, not by DRAM (1.0-1.5 TB/s at S >= 2053 in the published run,
// ~47 instructions per row and thread in its SASS: docs/perf-log.md v17), so a value costs as few as possible:
// liveness is one comparison with a bound (mask_live.hpp), "nonzero" an OR of the raw bits, and the loads are
// unconditional: a row past the mask's end re-reads the last row, a column past it the last column. A duplicate of a
// value the part holds changes none of its flags; the live bits and rows it would add are masked off (columns by the
// lane's own predicate, rows by the warp's count).
// Loads that the compiler keeps in the order written: with plain loads each row's arithmetic and ballots moved up
// behind that row's load in the SASS, so a thread had two loads in flight instead of 32. (volatile binds NVVM;
// ptxas kept them in place too, as the SASS shows, but nothing obliges it.)
__device__ __forceinline__ uint32_t load_u32_now(const uint16_t* p) {
  uint32_t r;
  asm volatile("ld.global.u32 %0, [%1];" : "=r"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ uint32_t load_u16_now(const uint16_t* p) {
  uint16_t r;
  asm volatile("ld.global.u16 %0, [%1];" : "=h"(r) : "l"(p));
  return r;
}

template <bool kPairs>
__global__ void __launch_bounds__(256) classify_kernel(const ClassifyParams p) {
  constexpr int kCols = kGroupParts * kPart, kRows = kPart / 2;
  const int group = blockIdx.x % p.groups, b = blockIdx.x / p.groups, pm = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, part = warp / 2, row0 = (warp % 2) * kRows;
  const int col = group * kCols + part * kPart + 2 * lane;  // this thread's even column
  const int rows = min(kPart, p.seq_len - pm * kPart) - row0;  // of this warp's 32 (may be <= 0)
  const int part_n = group * kGroupParts + part;
  // A warp without rows, or whose part lies past the mask's end, reads clamped duplicates like the others and
  // stores nothing. (Under a branch the compiler could not tell the ballots warp-uniform and doubled them.)
  const bool active = rows > 0 && part_n < p.parts;
  // The list kernel behind may launch now: it waits for this grid before it reads anything.
  device::launch_dependents();
  __shared__ unsigned s_flags[kGroupParts];           // bit 0: nonzero, 1: live, 2: live and nonzero
  __shared__ unsigned long long s_live[kGroupParts];  // rows with a live value
  if (threadIdx.x < kGroupParts) {
    s_flags[threadIdx.x] = 0;
    s_live[threadIdx.x] = 0;
  }
  // The warp's first row (the mask's last for a warp without rows) and how many rows after it exist.
  const int first_row = min(pm * kPart + row0, p.seq_len - 1), more_rows = min(kRows - 1, p.seq_len - 1 - first_row);
  // With kPairs S is even, so the last pair starts at S - 2.
  const int c0 = kPairs ? min(col, p.seq_len - 2) : min(col, p.seq_len - 1), c1 = min(col + 1, p.seq_len - 1);
  const uint16_t* src = reinterpret_cast<const uint16_t*>(p.mask) + (int64_t(b) * p.seq_len + first_row) * p.seq_len;
  const auto load = [&](int r) {
    const uint16_t* at = src + int64_t(r) * p.seq_len;
    return kPairs ? load_u32_now(at + c0) : load_u16_now(at + c0) | load_u16_now(at + c1) << 16;
  };
  uint32_t v[kRows];  // the pair: even column in the low 16 bits
  // Two forms of the loads alone (no warp-synchronous code under the branch): every row, or rows clamped.
  if (more_rows == kRows - 1) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) v[r] = load(r);
  } else {
#pragma unroll
    for (int r = 0; r < kRows; ++r) v[r] = load(min(r, more_rows));
  }
  __syncthreads();  // shared flags initialized

  const bool ok0 = col < p.seq_len, ok1 = col + 1 < p.seq_len;
  uint64_t* words = p.bits + ((int64_t(b) * p.parts + pm) * p.parts + part_n) * kPart + row0;
  uint32_t bits_or = 0;  // every value's bits, OR-ed: nonzero where some magnitude is
  bool live_nonzero = false;
  uint32_t live_rows = 0;  // bit r: row row0 + r has a live value
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float m0 = __uint_as_float(v[r] << 16), m1 = __uint_as_float(v[r] & 0xffff0000u);  // bf16 -> fp32
    const bool live0 = ok0 && mask_value_live(m0), live1 = ok1 && mask_value_live(m1);
    bits_or |= v[r];
    live_nonzero |= (live0 && m0 != 0.f) || (live1 && m1 != 0.f);
    const unsigned even = __ballot_sync(0xffffffffu, live0), odd = __ballot_sync(0xffffffffu, live1);
    // Rows past the end store their duplicate's word: in bounds (a part has 64), never read (load_mask_bits reads
    // rows below S only).
    if (lane == 0 && active) words[r] = uint64_t(odd) << 32 | even;
    live_rows |= ((even | odd) != 0u ? 1u : 0u) << r;
  }
  live_rows &= rows >= kRows ? ~0u : rows <= 0 ? 0u : (1u << rows) - 1u;  // duplicates of the last row
  const bool nonzero = __reduce_or_sync(0xffffffffu, bits_or & 0x7fff7fffu) != 0u;  // NaN counts, -0 does not
  live_nonzero = __any_sync(0xffffffffu, live_nonzero);
  if (lane == 0 && active) {
    atomicOr(&s_flags[part], (nonzero ? 1u : 0u) | (live_rows != 0u ? 2u : 0u) | (live_nonzero ? 4u : 0u));
    atomicOr(&s_live[part], static_cast<unsigned long long>(live_rows) << row0);
  }
  __syncthreads();
  if (threadIdx.x < kGroupParts && group * kGroupParts + static_cast<int>(threadIdx.x) < p.parts) {
    const int q = threadIdx.x;
    const unsigned f = s_flags[q];
    const int64_t idx = (int64_t(b) * p.parts + pm) * p.parts + group * kGroupParts + q;
    p.cls[idx] = !(f & 1u) ? kZero : !(f & 2u) ? kDead : !(f & 4u) ? kBits : kValues;
    p.live_rows[idx] = s_live[q];
  }
  // The kernel before this one in the stream (see the top): this grid does not complete before it does. A no-op on a
  // plain launch.
  if (blockIdx.x == 0 && blockIdx.y == 0) device::grid_dependency_wait();
}

struct ListParams {
  const uint8_t* cls;
  const uint64_t* live_rows;
  MaskTileLists out;
  int batch, seq_len, parts;
  int m_blocks, n_blocks;  // query blocks and key tiles of the kernel's shape
};

// One warp per (batch, query block). Launched programmatically behind the classification, it waits for it (a no-op
// otherwise) and lets the attention launch. kSubM / kSubN: parts per query block and per key tile (1 or 2).
// kMarkBounded: flag bounded blocks in the counts (MaskTileLists::counts) for the Hopper kernel's fixed form; a
// template parameter, so that the lists for the other kernels cost what they did before the flag existed.
//
// Every load of a round is issued before any is used, and the first round's classes before the live-row words are
// reduced (neither depends on the other): written as loops over runtime bounds, each load waited for its
// predecessor's use, a chain of ~10-16 L2 round trips that put the kernel 2.4-5 us behind the classification in the
// layer (docs/perf-log.md v18).
template <int kSubM, int kSubN, bool kMarkBounded>
__global__ void __launch_bounds__(128) list_kernel(const ListParams p) {
  constexpr int kTilesPerLane = 2;  // key tiles per lane and round: 64 (S = 8192 in 128-key tiles) in one round
  constexpr int kPartsPerLane = 4;  // live-row words per lane, part row and round: 128 parts (S = 8192) in one
  constexpr uint8_t kAbsent = 0xff;  // a part past the mask's end
  device::grid_dependency_wait();
  device::launch_dependents();
  const int warp = static_cast<int>((int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
  if (warp >= p.batch * p.m_blocks) return;
  const int b = warp / p.m_blocks, mb = warp % p.m_blocks;
  const int pm0 = mb * kSubM, part_rows = min(kSubM, p.parts - pm0);  // the last block may have one part row
  const int64_t row0 = int64_t(b) * p.parts + pm0;                   // [b][pm0] in units of part rows

  uint8_t cls[kTilesPerLane][kSubM][kSubN];
  const auto load_classes = [&](int base) {
#pragma unroll
    for (int i = 0; i < kTilesPerLane; ++i) {
      const int nb = base + i * 32 + lane;
#pragma unroll
      for (int h = 0; h < kSubM; ++h) {
#pragma unroll
        for (int c = 0; c < kSubN; ++c) {
          const int pn = nb * kSubN + c;
          cls[i][h][c] = nb < p.n_blocks && h < part_rows && pn < p.parts ? p.cls[(row0 + h) * p.parts + pn] : kAbsent;
        }
      }
    }
  };
  load_classes(0);

  bool dead_row = false;
  unsigned long long live[kSubM] = {};
  for (int base = 0; base < p.parts; base += 32 * kPartsPerLane) {
    unsigned long long w[kPartsPerLane][kSubM];
#pragma unroll
    for (int i = 0; i < kPartsPerLane; ++i) {
      const int pn = base + i * 32 + lane;
#pragma unroll
      for (int h = 0; h < kSubM; ++h) {
        w[i][h] = pn < p.parts && h < part_rows ? p.live_rows[(row0 + h) * p.parts + pn] : 0;
      }
    }
#pragma unroll
    for (int i = 0; i < kPartsPerLane; ++i) {
#pragma unroll
      for (int h = 0; h < kSubM; ++h) live[h] |= w[i][h];
    }
  }
#pragma unroll
  for (int h = 0; h < kSubM; ++h) {
    if (h >= part_rows) break;
    const unsigned long long l =
        __reduce_or_sync(0xffffffffu, static_cast<unsigned>(live[h])) |
        static_cast<unsigned long long>(__reduce_or_sync(0xffffffffu, static_cast<unsigned>(live[h] >> 32))) << 32;
    const int rows = min(kPart, p.seq_len - (pm0 + h) * kPart);
    const unsigned long long valid = rows == kPart ? ~0ull : (1ull << rows) - 1;
    dead_row |= (l & valid) != valid;
  }

  int count = 0;
  bool values = false;  // some kept entry applies mask values
  uint32_t* entries = p.out.entries + int64_t(warp) * p.out.stride;
  for (int base = 0; base < p.n_blocks; base += 32 * kTilesPerLane) {
    if (base > 0) load_classes(base);
#pragma unroll
    for (int i = 0; i < kTilesPerLane; ++i) {
      const int nb = base + i * 32 + lane;
      bool keep = false;
      uint32_t apply = 0;
#pragma unroll
      for (int h = 0; h < kSubM; ++h) {
        uint32_t a = kMaskNone;
#pragma unroll
        for (int c = 0; c < kSubN; ++c) {
          const uint8_t k = cls[i][h][c];
          if (k == kAbsent) continue;
          keep |= k != kDead;
          a = max(a, k == kZero ? kMaskNone : k == kValues ? kMaskValues : kMaskBits);
        }
        if (dead_row && a == kMaskBits) a = kMaskBitsDeadRow;
        apply |= a << (2 * h);
      }
      keep = nb < p.n_blocks && (keep || dead_row);
      if constexpr (kMarkBounded) {
#pragma unroll
        for (int h = 0; h < kSubM; ++h) values |= keep && ((apply >> (2 * h)) & 3u) == kMaskValues;
      }
      const unsigned ballot = __ballot_sync(0xffffffffu, keep);
      if (keep) entries[count + __popc(ballot & ((1u << lane) - 1u))] = (uint32_t(nb) << 4) | apply;
      count += __popc(ballot);
    }
  }
  bool bounded = false;
  if constexpr (kMarkBounded) bounded = !dead_row && !__any_sync(0xffffffffu, values);
  if (lane == 0) p.out.counts[warp] = count | (bounded ? kListBounded : 0);
}

}  // namespace

size_t mask_tile_scratch_bytes(int64_t batch, int64_t seq_len) { return carve(nullptr, batch, seq_len).bytes; }

Status prepare_mask_tiles(AttentionParams* p, int block_m, int block_n, bool mark_bounded,
                          detail::KernelLaunch* classify, detail::KernelLaunch* list) {
  if (block_m <= 0 || block_n <= 0 || block_m % kPart != 0 || block_n % kPart != 0 || block_m > 2 * kPart ||
      block_n > 2 * kPart) {
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
  // The condition under which the kernels load mask pairs as words (prepare_attention sets it) is this one's too.
  *classify = detail::KernelLaunch("mask classification launch",
                                    p->mask_pairs ? classify_kernel<true> : classify_kernel<false>, {grid, 256}, cp);

  ListParams lp{};
  lp.cls = s.cls;
  lp.live_rows = s.live_rows;
  lp.batch = p->batch;
  lp.seq_len = p->seq_len;
  lp.parts = static_cast<int>(parts);
  lp.m_blocks = m_blocks;
  lp.n_blocks = (p->seq_len + block_n - 1) / block_n;
  lp.out = {s.entries, s.counts, lp.n_blocks, s.bits, lp.parts};
  const int64_t warps = int64_t(p->batch) * lp.m_blocks;
  // The parts per query block and per key tile (1 or 2 each) are the kernel's template parameters.
  const int sub_m = block_m / kPart, sub_n = block_n / kPart;
  if (mark_bounded && (sub_m != 2 || sub_n != 2)) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: bounded-block flags only for 128 x 128 tiles", kOp);
  }
  const auto kernel = mark_bounded ? list_kernel<2, 2, true>
                      : sub_m == 1 ? (sub_n == 1 ? list_kernel<1, 1, false> : list_kernel<1, 2, false>)
                                   : (sub_n == 1 ? list_kernel<2, 1, false> : list_kernel<2, 2, false>);
  *list = detail::KernelLaunch("mask tile list launch", kernel, {dim3(static_cast<unsigned>((warps + 3) / 4)), 128}, lp);
  p->tiles = lp.out;
  return Status::Ok();
}

}  // namespace gk::gemma3
