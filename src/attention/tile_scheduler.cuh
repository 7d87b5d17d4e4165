// Which (batch, query head(s), query block) a work tile computes, and how many key tiles it visits. Shared by both
// attention kernels; the decoding (tile_coord, row_of, key_tile) also runs on the host, where a test walks every
// work tile of a grid and checks that each query row meets each of its key tiles exactly once.
#pragma once

#include "common/device/sm80_primitives.cuh"
#include "attention/params.hpp"
#include "attention/mask_policy.cuh"
#include "attention/tail_packing.hpp"
#include "attention/work_tile.hpp"

namespace gk::gemma3 {

// Work tiles are ordered heaviest first: the packed GQA tails when p.tail_rows > 0 (they visit every key tile),
// then query block-major from the last block down. Under a causal mask the long blocks start early and the last
// tiles each SM takes are short ones.
template <MaskMode kMask, int kBlockM, int kBlockN, bool kBoundedFlag = false, bool kCached = false>
__host__ __device__ __forceinline__ TileCoord tile_coord(const AttentionParams& p, int tile) {
  TileCoord t;
  const int bh_count = p.batch * p.num_q_heads;
  int top = p.num_m_blocks - 1;  // the heaviest unpacked query block
  t.tail_rows = 0;
  t.tail_inv = 0;
  if (p.tail_rows > 0) {
    const int kv_heads = p.num_q_heads / p.group_size, tails = p.batch * kv_heads;
    if (tile < tails) {
      t.tail_rows = p.tail_rows;
      t.tail_inv = p.tail_inv;
      t.b = tile / kv_heads;
      t.kvh = tile % kv_heads;
      t.h = t.kvh * p.group_size;
    }
    tile -= tails;
    top -= 1;
  }
  const int m_block = t.tail_rows > 0 ? p.num_m_blocks - 1 : top - tile / bh_count;
  if (t.tail_rows == 0) {
    const int bh = tile % bh_count;
    t.b = bh / p.num_q_heads;
    t.h = bh % p.num_q_heads;
    t.kvh = t.h / p.group_size;
  }
  t.m0 = m_block * kBlockM;
  t.list = nullptr;
  t.entries[0] = t.entries[1] = 0u;  // from the slot (read_tile: Hopper kernel, additive mode)
  t.bounded = false;
  t.block = t.b * p.num_m_blocks + m_block;
  // Only a kernel that reads the bounded flag has the list kernel set it (build_mask_tiles' mark_bounded, the list
  // kernel's kMarkBounded), so the others' code stays as it was without it.
  t.p0 = 0;
  t.key_len = p.seq_len;
  MaskPolicy<kMask>::template visit<kBlockM, kBlockN, kBoundedFlag, kCached>(p, t);
  return t;
}

// A decoded work tile in kTileSlotBytes of shared memory, as the Hopper kernel's producer hands it to the consumers
// (so the divisions of tile_coord, and in additive mode the first reads of the tile list, stay off their path from
// the Q load to the first Q K^T). `tile` >= p.num_tiles means no more work.
inline constexpr uint32_t kTileSlotBytes = 48;

// kCached: the Hopper kernel's cached form also carries the tile's cached length and key count (TileCoord::p0,
// key_len) in the slot.
template <MaskMode kMask, bool kCached = false>
__device__ __forceinline__ void write_tile(uint32_t slot, int tile, const TileCoord& t) {
  device::st_shared_v4(slot, make_uint4(tile, t.b, t.h, t.m0));
  device::st_shared_v4(slot + 16, make_uint4(t.n_blocks, t.tail_rows, t.block, t.kvh));
  if constexpr (kMask == MaskMode::kAdditive) {
    // A list has at least one entry (mask_tiles.cu); entries past its count are never decoded.
    const uint32_t e0 = t.n_blocks > 0 ? t.list[0] : 0u, e1 = t.n_blocks > 1 ? t.list[1] : 0u;
    device::st_shared_v4(slot + 32, make_uint4(e0, e1, t.bounded ? 1u : 0u, 0u));
  }
  if constexpr (kMask == MaskMode::kSliding || kCached) {
    device::st_shared_v4(slot + 32, make_uint4(t.n_lo, kCached ? t.p0 : 0, kCached ? t.key_len : 0, 0u));
  }
}

template <MaskMode kMask, bool kCached = false>
__device__ __forceinline__ int read_tile(uint32_t slot, const AttentionParams& p, TileCoord* t) {
  const uint4 a = device::ld_shared_v4(slot), c = device::ld_shared_v4(slot + 16);
  t->b = static_cast<int>(a.y);
  t->h = static_cast<int>(a.z);
  t->m0 = static_cast<int>(a.w);
  t->n_blocks = static_cast<int>(c.x);
  t->tail_rows = static_cast<int>(c.y);
  t->tail_inv = t->tail_rows > 0 ? p.tail_inv : 0;
  t->block = static_cast<int>(c.z);
  t->kvh = static_cast<int>(c.w);
  t->list = kMask == MaskMode::kAdditive ? p.tiles.entries + int64_t(t->block) * p.tiles.stride : nullptr;
  t->entries[0] = t->entries[1] = 0u;
  t->bounded = false;
  t->n_lo = kMask == MaskMode::kSliding ? static_cast<int>(device::ld_shared_v4(slot + 32).x) : 0;
  t->p0 = 0;
  t->key_len = p.seq_len;
  if constexpr (kCached) {
    const uint4 e = device::ld_shared_v4(slot + 32);
    t->p0 = static_cast<int>(e.y);
    t->key_len = static_cast<int>(e.z);
  }
  if constexpr (kMask == MaskMode::kAdditive) {
    const uint4 e = device::ld_shared_v4(slot + 32);
    t->entries[0] = e.x;
    t->entries[1] = e.y;
    t->bounded = e.z != 0u;
  }
  return static_cast<int>(a.x);
}

// Query head and position of row i (0..kBlockM-1) of a work tile.
__host__ __device__ __forceinline__ void row_of(const TileCoord& t, int i, int* head, int* pos) {
  const int j = tail_quotient(i, t.tail_inv);  // 0 unless packed
  *head = t.h + j;
  *pos = t.m0 + i - j * t.tail_rows;
}

// A persistent grid's r-th tile for this CTA. Rounds alternate direction (a snake), so the CTA that took the
// heaviest tile of one round takes the lightest of the next: under the heaviest-first order a plain stride would
// hand CTA 0 the heaviest tile of every round. Past num_tiles: no more work. A global counter handing out tiles
// dynamically was no better, and its per-call reset costs time in the layer (docs/perf-log.md v8).
__device__ __forceinline__ int persistent_tile(int round) {
  const int g = static_cast<int>(gridDim.x), c = static_cast<int>(blockIdx.x);
  return round * g + ((round & 1) ? g - 1 - c : c);
}

// The i-th key tile a work tile visits (MaskPolicy::key_tile).
template <MaskMode kMask, int kBlockN>
__host__ __device__ __forceinline__ KeyTile key_tile(const TileCoord& t, int i, int half) {
  return MaskPolicy<kMask>::template key_tile<kBlockN>(t, i, half);
}

}  // namespace gk::gemma3
