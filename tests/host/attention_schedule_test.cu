// The Hopper attention kernel's work decomposition, walked on the host (attention_scheduler.cuh's decoding is
// __host__ __device__): over every work tile of a grid, each real query row must meet each key tile at or left of
// its diagonal exactly once (no mask: every key tile; a sliding window: every key tile the row's band touches, and
// no tile the block's band does not), packed GQA tails included, and a causal work tile must visit its diagonal
// first. Both key tiles of the sm90 kernel: 128 keys (head_dim 128) and 64 (head_dim 256), where a causal block also
// visits the tile right of its first half's rows (masked there).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "attention/attention_plan.hpp"
#include "attention/decode_plan.hpp"
#include "attention/tile_scheduler.cuh"
#include "attention/tail_packing.hpp"

namespace {

using gk::gemma3::AttentionParams;
using gk::gemma3::MaskMode;
using gk::gemma3::TileCoord;

constexpr int kBlock = 128;

struct Grid {
  int batch, seq_len, q_heads, group;
  bool pack_tails;
};

std::string name(const Grid& g) {
  return "B" + std::to_string(g.batch) + " S" + std::to_string(g.seq_len) + " H" + std::to_string(g.q_heads) + "/" +
         std::to_string(g.q_heads / g.group) + (g.pack_tails ? " packed" : " separate");
}

// The decoded grid's parameters as the launch would set them.
AttentionParams params(const Grid& g) {
  AttentionParams p{};
  p.batch = g.batch;
  p.seq_len = g.seq_len;
  p.num_q_heads = g.q_heads;
  p.group_size = g.group;
  p.num_m_blocks = (g.seq_len + kBlock - 1) / kBlock;
  p.tail_rows = g.pack_tails ? gk::gemma3::packed_tail_rows(g.seq_len, g.group, kBlock) : 0;
  p.tail_inv = gk::gemma3::tail_reciprocal(p.tail_rows);
  gk::gemma3::AttentionShape s;  // counted as the planner counts them
  s.batch = g.batch;
  s.seq_len = g.seq_len;
  s.num_q_heads = g.q_heads;
  s.group_size = g.group;
  p.num_tiles = static_cast<int>(gk::gemma3::attention_tiles(s, kBlock, p.tail_rows));
  return p;
}

template <MaskMode kMask, int kBlockN = kBlock>
void check_grid(const Grid& g, int window = 0) {
  constexpr bool kCausal = kMask == MaskMode::kCausal || kMask == MaskMode::kSliding;
  AttentionParams p = params(g);
  p.window = window;
  const int key_tiles = (g.seq_len + kBlockN - 1) / kBlockN;
  // (batch, head, position) -> visits per key tile.
  std::map<std::tuple<int, int, int>, std::vector<int>> visits;
  for (int w = 0; w < p.num_tiles; ++w) {
    const TileCoord t = gk::gemma3::tile_coord<kMask, kBlock, kBlockN>(p, w);
    ASSERT_GE(t.n_blocks, 1) << name(g) << " tile " << w;
    std::vector<int> keys;
    for (int i = 0; i < t.n_blocks; ++i) {
      const int n0 = gk::gemma3::key_tile<kMask, kBlockN>(t, i, 0).n0;
      ASSERT_EQ(n0 % kBlockN, 0);
      keys.push_back(n0 / kBlockN);
    }
    // The diagonal first (the block's last key tile): with square tiles the peeled step is the one that masks.
    if (kCausal) EXPECT_EQ(keys.front(), *std::max_element(keys.begin(), keys.end())) << name(g) << " tile " << w;
    if (kCausal && kBlockN == kBlock) EXPECT_EQ(keys.front(), t.m0 / kBlock) << name(g) << " tile " << w;
    if (window > 0) {  // nothing left of the band of the block's first row
      for (int k : keys) EXPECT_GE(k, std::max(0, t.m0 - (window - 1)) / kBlockN) << name(g) << " tile " << w;
    }
    const int rows = t.tail_rows > 0 ? t.tail_rows * g.group : kBlock;
    for (int r = 0; r < rows; ++r) {
      int head = 0, pos = 0;
      gk::gemma3::row_of(t, r, &head, &pos);
      if (pos >= g.seq_len) continue;  // padding rows are never stored
      ASSERT_LT(head, g.q_heads);
      auto& v = visits[{t.b, head, pos}];
      v.resize(key_tiles, 0);
      for (int k : keys) {
        ASSERT_LT(k, key_tiles) << name(g);
        ++v[k];
      }
    }
  }
  ASSERT_EQ(visits.size(), size_t(g.batch) * g.q_heads * g.seq_len) << name(g) << ": rows missing";
  for (const auto& [key, v] : visits) {
    const int pos = std::get<2>(key);
    for (int k = 0; k < key_tiles; ++k) {
      const bool right_of_diagonal = kCausal && k > pos / kBlockN;
      const bool left_of_band = window > 0 && k < std::max(0, pos - (window - 1)) / kBlockN;
      // Under the block's rows but right of this row's diagonal (key tiles smaller than the block): masked.
      const bool in_block = k * kBlockN < (pos / kBlock + 1) * kBlock;
      const auto where = [&] {
        return name(g) + " window " + std::to_string(window) + ": batch " + std::to_string(std::get<0>(key)) +
               " head " + std::to_string(std::get<1>(key)) + " pos " + std::to_string(pos) + " key tile " +
               std::to_string(k);
      };
      if (left_of_band || (right_of_diagonal && in_block && kBlockN < kBlock)) {
        ASSERT_LE(v[k], 1) << where();  // a tile the block's band touches: visited once, its keys masked for this row
      } else {
        ASSERT_EQ(v[k], right_of_diagonal ? 0 : 1) << where();
      }
    }
  }
}

std::vector<Grid> grids() {
  std::vector<Grid> out;
  for (int b : {1, 2, 3}) {
    for (int s : {1, 37, 128, 129, 293, 384, 512, 613, 700}) {
      for (int group : {1, 3}) {
        for (bool pack : {true, false}) out.push_back({b, s, 24, group, pack});
      }
    }
  }
  return out;
}

TEST(AttentionSchedule, CausalEveryRowMeetsItsKeyTilesOnce) {
  for (const Grid& g : grids()) {
    check_grid<MaskMode::kCausal>(g);
    check_grid<MaskMode::kCausal, 64>(g);
  }
}

TEST(AttentionSchedule, SlidingWindowEveryRowMeetsItsBandOnce) {
  for (const Grid& g : grids()) {
    for (int window : {1, 64, 127, 128, 129, 300}) {
      check_grid<MaskMode::kSliding>(g, window);
      check_grid<MaskMode::kSliding, 64>(g, window);
    }
  }
}

TEST(AttentionSchedule, NoMaskEveryRowMeetsEveryKeyTileOnce) {
  for (const Grid& g : grids()) {
    check_grid<MaskMode::kNone>(g);
    check_grid<MaskMode::kNone, 64>(g);
  }
}

}  // namespace

namespace {

// The cached forms (the sm80 kernel's 64-row blocks and 64-key tiles; the sm90 kernel's 128-row blocks and 128- or
// 64-key tiles): the new query row i of batch b sits at position kv_lens[b] + i among kv_lens[b] + S keys. Every key
// tile holding a key the row sees is met exactly once; any other visited tile at most once (its keys masked for that
// row); none past the keys' end. Under causal masking only the first tile visited may reach past the keys' end
// (the sm90 kernel zeroes those rows of V in that tile alone).
template <MaskMode kMask, int kBM = 64, int kB = 64>
void check_cached(int batch, int seq_len, const std::vector<int>& lens, int window) {
  constexpr bool kCausal = kMask != MaskMode::kNone;
  AttentionParams p{};
  p.batch = batch;
  p.seq_len = seq_len;
  p.num_q_heads = 2;
  p.group_size = 1;
  p.num_m_blocks = (seq_len + kBM - 1) / kBM;
  p.num_tiles = p.num_m_blocks * batch * p.num_q_heads;
  p.window = window;
  p.kv_lens = lens.data();
  p.kv_capacity = 1 << 20;
  const std::string where = "S " + std::to_string(seq_len) + " window " + std::to_string(window) + " block " +
                            std::to_string(kBM) + "x" + std::to_string(kB);
  for (int w = 0; w < p.num_tiles; ++w) {
    const TileCoord t = gk::gemma3::tile_coord<kMask, kBM, kB, false, true>(p, w);
    ASSERT_EQ(t.p0, lens[t.b]) << where;
    ASSERT_EQ(t.key_len, lens[t.b] + seq_len) << where;
    std::vector<int> seen((t.key_len + kB - 1) / kB, 0);
    for (int i = 0; i < t.n_blocks; ++i) {
      const int n0 = gk::gemma3::key_tile<kMask, kB>(t, i, 0).n0;
      ASSERT_EQ(n0 % kB, 0) << where;
      ASSERT_LT(n0, t.key_len) << where << ": a tile past the keys";
      if (kCausal && i > 0) ASSERT_LE(n0 + kB, t.key_len) << where << ": a later tile reaches past the keys";
      ++seen[n0 / kB];
    }
    for (int r = 0; r < kBM && t.m0 + r < seq_len; ++r) {
      const int pos = t.p0 + t.m0 + r;
      for (int k = 0; k < int(seen.size()); ++k) {
        bool sees = false;  // any key of tile k visible from pos
        for (int j = k * kB; j < std::min((k + 1) * kB, t.key_len) && !sees; ++j) {
          sees = (!kCausal || j <= pos) && (window == 0 || pos - j < window);
        }
        if (sees) {
          ASSERT_EQ(seen[k], 1) << where << ": batch " << t.b << " pos " << pos << " key tile " << k;
        } else {
          ASSERT_LE(seen[k], 1) << where << ": batch " << t.b << " pos " << pos << " key tile " << k;
        }
      }
    }
  }
}

TEST(AttentionSchedule, CachedRowsMeetTheirKeysOnce) {
  const std::vector<int> lens = {0, 1, 63, 64, 100, 4097};
  for (int s : {1, 7, 64, 65, 130}) {
    check_cached<MaskMode::kCausal>(int(lens.size()), s, lens, 0);
    check_cached<MaskMode::kNone>(int(lens.size()), s, lens, 0);
    for (int window : {1, 50, 64, 129, 1024}) check_cached<MaskMode::kSliding>(int(lens.size()), s, lens, window);
  }
  for (int s : {17, 128, 129, 300}) {  // the sm90 kernel's cached form: 128-row blocks, D = 128 and 256 key tiles
    check_cached<MaskMode::kCausal, 128, 128>(int(lens.size()), s, lens, 0);
    check_cached<MaskMode::kCausal, 128, 64>(int(lens.size()), s, lens, 0);
    for (int window : {1, 50, 129, 1024}) {
      check_cached<MaskMode::kSliding, 128, 128>(int(lens.size()), s, lens, window);
      check_cached<MaskMode::kSliding, 128, 64>(int(lens.size()), s, lens, window);
    }
  }
}

}  // namespace

namespace {

// The decode kernel's splits: for every range of keys a sequence's rows see and every split count, the splits'
// tile runs are disjoint, in order, and cover exactly the tiles from the one holding the first key to the one
// holding the last.
TEST(DecodeSchedule, SplitsCoverTheKeyRangeOnce) {
  using gk::gemma3::decode_range;
  using gk::gemma3::kDecodeKeys;
  for (int key_len : {1, 2, 63, 64, 65, 1000, 4113, 32768}) {
    for (int lo : {0, 1, 63, 64, 500, 4000}) {
      if (lo >= key_len) continue;
      for (int splits : {1, 2, 3, 7, 33, 128}) {
        int next = 0;
        int lo_tile = -1;
        for (int z = 0; z < splits; ++z) {
          const auto r = decode_range(lo, key_len, splits, z);
          lo_tile = r.lo_tile;
          ASSERT_LE(r.t0, r.t1);
          if (r.t0 == r.t1) continue;
          ASSERT_EQ(r.t0, next) << key_len << " " << lo << " " << splits << " " << z;
          next = r.t1;
        }
        ASSERT_EQ(lo_tile, lo / kDecodeKeys);
        ASSERT_EQ(lo_tile + next, (key_len + kDecodeKeys - 1) / kDecodeKeys) << key_len << " " << lo << " " << splits;
      }
    }
  }
  // The planner: no more splits than key tiles, enough CTAs for the target, a workspace for the most it may take.
  EXPECT_EQ(gk::gemma3::decode_splits(1, 8, 1, 3, 8193), 33);
  EXPECT_EQ(gk::gemma3::decode_splits(1, 8, 1, 3, 100), 2);
  EXPECT_EQ(gk::gemma3::decode_splits(64, 8, 1, 3, 2049), 1);
  EXPECT_EQ(gk::gemma3::decode_scratch_bytes(1, 64, 24, 1, 128), 0u);
  EXPECT_EQ(gk::gemma3::decode_scratch_bytes(33, 1, 24, 1, 128), size_t(33) * 24 * 130 * 4);
}

}  // namespace
