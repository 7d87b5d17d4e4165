// The decode kernel's shape and its split of the key range (attention_decode.cuh), in plain C++ for the planner, the
// workspace size and the host tests. A decode call has few new tokens per sequence: the query rows of one kv head's
// group (group_size heads x new tokens) form 16-row blocks, and the cached keys of each (sequence, kv head) are
// split over several CTAs so that every SM streams the cache; a combine kernel merges the splits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace gk::gemma3 {

inline constexpr int kDecodeMaxNew = 16;   // new tokens per sequence the decode kernel takes
inline constexpr int kDecodeRows = 16;     // query rows per CTA (one m16 block)
inline constexpr int kDecodeKeys = 64;     // keys per tile (16 per warp)
// CTAs a call aims for: two per SM of a 132-SM Hopper part (each CTA holds about 100 KB of shared memory). A
// constant, not the device's count, so that the workspace size follows from the call's shape alone.
inline constexpr int64_t kDecodeTargetCtas = 264;
inline constexpr int kDecodeMaxSplits = 128;

inline bool decode_applies(int64_t new_tokens) { return new_tokens <= kDecodeMaxNew; }

inline int64_t decode_row_blocks(int64_t new_tokens, int64_t group_size) {
  return (new_tokens * group_size + kDecodeRows - 1) / kDecodeRows;
}

// The splits a call of this shape may use: enough CTAs for kDecodeTargetCtas, at most kDecodeMaxSplits.
inline int decode_max_splits(int64_t batch, int64_t kv_heads, int64_t new_tokens, int64_t group_size) {
  const int64_t units = batch * kv_heads * decode_row_blocks(new_tokens, group_size);
  return static_cast<int>(std::clamp<int64_t>((kDecodeTargetCtas + units - 1) / units, 1, kDecodeMaxSplits));
}

// The splits a call uses: no more than the key tiles of its longest sequence (max_keys: the host's bound on cached
// + new tokens).
inline int decode_splits(int64_t batch, int64_t kv_heads, int64_t new_tokens, int64_t group_size, int64_t max_keys) {
  const int64_t tiles = std::max<int64_t>(1, (max_keys + kDecodeKeys - 1) / kDecodeKeys);
  return static_cast<int>(std::min<int64_t>(decode_max_splits(batch, kv_heads, new_tokens, group_size), tiles));
}

// Scratch for the partial outputs: per split and query row, head_dim floats and the row's (maximum, sum).
inline size_t decode_scratch_bytes(int splits, int64_t batch, int64_t q_heads, int64_t new_tokens, int64_t head_dim) {
  if (splits <= 1) return 0;
  return size_t(splits) * size_t(batch * q_heads * new_tokens) * size_t(head_dim + 2) * sizeof(float);
}

// The key tiles [t0, t1) (of kDecodeKeys keys, counted from key lo_tile * kDecodeKeys) that split z of `splits`
// visits for a sequence whose rows see keys [lo, key_len): the range in whole tiles, cut into equal runs.
struct DecodeRange {
  int lo_tile, t0, t1;
};
#if defined(__CUDACC__)
__host__ __device__
#endif
inline DecodeRange decode_range(int lo, int key_len, int splits, int z) {
  const int lo_tile = lo / kDecodeKeys;
  const int tiles = (key_len + kDecodeKeys - 1) / kDecodeKeys - lo_tile;
  const int per = (tiles + splits - 1) / splits;
  const int t0 = z * per;
  const int t1 = t0 + per < tiles ? t0 + per : tiles;
  return {lo_tile, t0, t1 > t0 ? t1 : t0};
}

}  // namespace gk::gemma3
