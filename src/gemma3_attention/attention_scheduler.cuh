// Which (batch, query head, query block) a CTA computes, and how many key tiles it visits. Shared by both
// attention kernels.
#pragma once

#include "gemma3_attention/params.hpp"

namespace gk::gemma3 {

struct TileCoord {
  int b, h, kvh;  // batch, query head, the kv head serving it (GQA)
  int m0;         // first query row of the block
  // Key tiles to visit: all of them; under a causal mask those at or left of the diagonal; under an additive
  // mask those its tile list names (`list`, built per call by mask_tiles.cu).
  int n_blocks;
  const uint32_t* list;
};

// The i-th key tile a work tile visits: its first key, and how the 64-row half `half` of the query block applies
// the mask there (MaskApply).
struct KeyTile {
  int n0;
  uint32_t mask;
};

// Work tiles are ordered query block-major, heaviest (largest m_block) first, so under a causal mask the long
// blocks start early and the last wave (or, for a persistent grid, each CTA's last tile) is a short one.
template <MaskMode kMask, int kBlockM, int kBlockN>
__device__ __forceinline__ TileCoord tile_coord(const AttentionParams& p, int tile) {
  TileCoord t;
  const int bh_count = p.batch * p.num_q_heads;
  const int bh = tile % bh_count;
  const int m_block = p.num_m_blocks - 1 - tile / bh_count;
  t.b = bh / p.num_q_heads;
  t.h = bh % p.num_q_heads;
  t.kvh = t.h / p.group_size;
  t.m0 = m_block * kBlockM;
  t.n_blocks = (p.seq_len + kBlockN - 1) / kBlockN;
  t.list = nullptr;
  if constexpr (kMask == MaskMode::kCausal) t.n_blocks = min(t.n_blocks, (t.m0 + kBlockM + kBlockN - 1) / kBlockN);
  if constexpr (kMask == MaskMode::kAdditive) {
    const int block = t.b * p.num_m_blocks + m_block;
    t.n_blocks = p.tiles.counts[block];
    t.list = p.tiles.entries + int64_t(block) * p.tiles.stride;
  }
  return t;
}

template <MaskMode kMask, int kBlockN>
__device__ __forceinline__ KeyTile key_tile(const TileCoord& t, int i, int half) {
  if constexpr (kMask == MaskMode::kAdditive) {
    const uint32_t e = t.list[i];
    return {static_cast<int>(e >> 4) * kBlockN, (e >> (2 * half)) & 3u};
  } else {
    return {i * kBlockN, kMaskNone};
  }
}

// A persistent grid's r-th tile for this CTA. Rounds alternate direction (a snake), so the CTA that took the
// heaviest tile of one round takes the lightest of the next: under the heaviest-first order a plain stride would
// hand CTA 0 the heaviest tile of every round (measured: 8% slower at S = 8192). Past num_tiles: no more work.
__device__ __forceinline__ int persistent_tile(int round) {
  const int g = static_cast<int>(gridDim.x), c = static_cast<int>(blockIdx.x);
  return round * g + ((round & 1) ? g - 1 - c : c);
}

}  // namespace gk::gemma3
