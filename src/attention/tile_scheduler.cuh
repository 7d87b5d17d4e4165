// Which (batch, query head(s), query block) a work tile computes, and how many key tiles it visits. Shared by both
// attention kernels; the decoding (tile_coord, row_of, key_tile) also runs on the host, where a test walks every
// work tile of a grid and checks that each query row meets each of its key tiles exactly once.
#pragma once

#include "common/device/sm80_primitives.cuh"
#include "attention/params.hpp"
#include "attention/tail_packing.hpp"

namespace gk::gemma3 {

struct TileCoord {
  int b, h, kvh;  // batch, (first) query head, the kv head serving it (GQA)
  int m0;         // first query position of the block
  // Key tiles to visit: all of them; under a causal mask those at or left of the diagonal; under an additive
  // mask those its tile list names (`list`, built per call by mask_tiles.cu).
  int n_blocks;
  const uint32_t* list;
  int block;  // b * num_m_blocks + the query block: the additive mask's tile list index
  // 0: row i of the block is position m0 + i of head h. Otherwise the block is a packed GQA tail (the last,
  // partial query block of every head of one kv group in one tile): row i is position m0 + i % tail_rows of
  // head h + i / tail_rows.
  int tail_rows;
  int tail_inv;  // tail_reciprocal(tail_rows): no division on the kernels' paths (tail_packing.hpp)
  // Additive mode, Hopper kernel: the tile list's first two entries, which the producer reads from the list into the
  // tile's slot (write_tile) and the consumers take from there (read_tile), so that their first two key tiles do
  // not wait on a load of the list.
  uint32_t entries[2];
  // Additive mode: the tile list says the block's logits stay within the softcap's bounds (kListBounded).
  bool bounded;
};

// The i-th key tile a work tile visits: its first key, and how the 64-row half `half` of the query block applies
// the mask there (MaskApply).
struct KeyTile {
  int n0;
  uint32_t mask;
};

// Work tiles of `block_m` query rows: one per (query block, batch, query head), except that packed GQA tails
// (p.tail_rows > 0) take one tile per (batch, kv head) for the last query block. Host code (the launch, the tests).
inline int64_t tile_count(const AttentionParams& p, int block_m) {
  const int64_t heads = int64_t(p.batch) * p.num_q_heads;
  const int64_t n = int64_t((p.seq_len + block_m - 1) / block_m) * heads;
  return p.tail_rows > 0 ? n - heads + heads / p.group_size : n;
}

// Work tiles are ordered heaviest first: the packed GQA tails when p.tail_rows > 0 (they visit every key tile),
// then query block-major from the last block down. Under a causal mask the long blocks start early and the last
// tiles each SM takes are short ones.
template <MaskMode kMask, int kBlockM, int kBlockN, bool kBoundedFlag = false>
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
  t.n_blocks = (p.seq_len + kBlockN - 1) / kBlockN;
  t.list = nullptr;
  t.entries[0] = t.entries[1] = 0u;  // from the slot (read_tile: Hopper kernel, additive mode)
  t.bounded = false;
  t.block = t.b * p.num_m_blocks + m_block;
  if constexpr (kMask == MaskMode::kCausal) t.n_blocks = min(t.n_blocks, (t.m0 + kBlockM + kBlockN - 1) / kBlockN);
  if constexpr (kMask == MaskMode::kAdditive) {
    // Only a kernel that reads the bounded flag has the list kernel set it (build_mask_tiles' mark_bounded, the
    // list kernel's kMarkBounded), so the others' code stays as it was without it.
    const int count = p.tiles.counts[t.block];
    t.n_blocks = kBoundedFlag ? count & kListCountMask : count;
    if constexpr (kBoundedFlag) t.bounded = (count & kListBounded) != 0;
    t.list = p.tiles.entries + int64_t(t.block) * p.tiles.stride;
  }
  return t;
}

// A decoded work tile in kTileSlotBytes of shared memory, as the Hopper kernel's producer hands it to the consumers
// (so the divisions of tile_coord, and in additive mode the first reads of the tile list, stay off their path from
// the Q load to the first Q K^T). `tile` >= p.num_tiles means no more work.
inline constexpr uint32_t kTileSlotBytes = 48;

template <MaskMode kMask>
__device__ __forceinline__ void write_tile(uint32_t slot, int tile, const TileCoord& t) {
  device::st_shared_v4(slot, make_uint4(tile, t.b, t.h, t.m0));
  device::st_shared_v4(slot + 16, make_uint4(t.n_blocks, t.tail_rows, t.block, t.kvh));
  if constexpr (kMask == MaskMode::kAdditive) {
    // A list has at least one entry (mask_tiles.cu); entries past its count are never decoded.
    const uint32_t e0 = t.n_blocks > 0 ? t.list[0] : 0u, e1 = t.n_blocks > 1 ? t.list[1] : 0u;
    device::st_shared_v4(slot + 32, make_uint4(e0, e1, t.bounded ? 1u : 0u, 0u));
  }
}

template <MaskMode kMask>
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
// hand CTA 0 the heaviest tile of every round (measured: 8% slower at S = 8192). Past num_tiles: no more work.
// A global counter handing out tiles dynamically measured no better (docs/perf-log.md, v8), and its per-call
// reset cost a few microseconds of the layer.
__device__ __forceinline__ int persistent_tile(int round) {
  const int g = static_cast<int>(gridDim.x), c = static_cast<int>(blockIdx.x);
  return round * g + ((round & 1) ? g - 1 - c : c);
}

// An additive tile list's entry (MaskTileLists) as the key tile it names, for the 64-row half `half`.
template <int kBlockN>
__host__ __device__ __forceinline__ KeyTile decode_key_entry(const TileCoord& t, uint32_t e, int half) {
  // A packed tail's positions all lie in the block's first 64 rows (group_size >= 2 heads of tail_rows fit in 128).
  const int h = t.tail_rows > 0 ? 0 : half;
  return {static_cast<int>(e >> 4) * kBlockN, (e >> (2 * h)) & 3u};
}

template <MaskMode kMask, int kBlockN>
__host__ __device__ __forceinline__ KeyTile key_tile(const TileCoord& t, int i, int half) {
  if constexpr (kMask == MaskMode::kAdditive) {
    return decode_key_entry<kBlockN>(t, t.list[i], half);
  } else if constexpr (kMask == MaskMode::kCausal) {
    // The diagonal tile first: the consumers' peeled first step is then the only one with masked keys, and a
    // warpgroup whose rows end before the tile's 65th key takes only its first 64 (attention_sm90.cuh).
    return {(i == 0 ? t.n_blocks - 1 : i - 1) * kBlockN, kMaskNone};
  } else {
    return {i * kBlockN, kMaskNone};
  }
}

}  // namespace gk::gemma3
