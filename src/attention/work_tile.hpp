// A work tile of the attention kernels as decoded from its index (tile_scheduler.cuh), and a key tile it visits
// (the mask policy, mask_policy.cuh). Plain data shared by host and device code.
#pragma once

#include <cstdint>

namespace gk::gemma3 {

struct TileCoord {
  int b, h, kvh;  // batch, (first) query head, the kv head serving it (GQA)
  int m0;         // first query position of the block
  // Key tiles to visit (MaskPolicy::visit): all of them; under a causal mask those at or left of the diagonal;
  // under a sliding window those from n_lo on to the diagonal; under an additive mask those its tile list names
  // (`list`, built per call by mask_tiles.cu).
  int n_blocks;
  int n_lo;  // sliding window: the first key tile in the block's band (0 otherwise)
  // With a key/value cache (AttentionParams::kv_lens): the block's row i is position p0 + m0 + i, and keys run up to
  // key_len (cached + new). Without one: 0 and seq_len.
  int p0, key_len;
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

}  // namespace gk::gemma3
