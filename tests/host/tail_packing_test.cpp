// The packed GQA tails' host/device arithmetic (src/attention/tail_packing.hpp): which shapes pack, and the
// division-free head index the kernels use for every row of a packed tile.
#include <gtest/gtest.h>

#include "attention/tail_packing.hpp"

namespace {

using gk::gemma3::packed_tail_rows;
using gk::gemma3::tail_quotient;
using gk::gemma3::tail_reciprocal;

TEST(TailPacking, WhichShapesPack) {
  constexpr int kBlock = 128;
  // The 047 suite (group of 3): only S = 2053 (5 rows a head) and S = 293 (37) have tails that fit three to a tile.
  EXPECT_EQ(packed_tail_rows(2053, 3, kBlock), 8);
  EXPECT_EQ(packed_tail_rows(293, 3, kBlock), 40);
  for (int s : {128, 256, 512, 1024, 8192}) EXPECT_EQ(packed_tail_rows(s, 3, kBlock), 0) << s;  // no partial block
  for (int s : {613, 3557}) EXPECT_EQ(packed_tail_rows(s, 3, kBlock), 0) << s;  // 101 rows: 3 * 104 > 128
  // Short sequences are all tail.
  EXPECT_EQ(packed_tail_rows(1, 3, kBlock), 8);
  EXPECT_EQ(packed_tail_rows(17, 3, kBlock), 24);
  EXPECT_EQ(packed_tail_rows(42, 3, kBlock), 0);  // 3 * 48 > 128
  // Group sizes: 1 never packs; larger groups need shorter tails.
  EXPECT_EQ(packed_tail_rows(2053, 1, kBlock), 0);
  EXPECT_EQ(packed_tail_rows(130, 2, kBlock), 8);
  EXPECT_EQ(packed_tail_rows(37, 2, kBlock), 40);
  EXPECT_EQ(packed_tail_rows(190, 2, kBlock), 64);  // two heads fill the tile (the 047 variant group2_tail64_s190)
  EXPECT_EQ(packed_tail_rows(293, 4, kBlock), 0);  // 4 * 40 > 128
  EXPECT_EQ(packed_tail_rows(129, 16, kBlock), 8);
  EXPECT_EQ(packed_tail_rows(130, 17, kBlock), 0);
}

TEST(TailPacking, QuotientIsExactForEveryRowAndTailSize) {
  for (int rows = 8; rows <= 128; rows += 8) {
    const int inv = tail_reciprocal(rows);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(tail_quotient(i, inv), i / rows) << "row " << i << ", tail " << rows;
  }
  EXPECT_EQ(tail_reciprocal(0), 0);
  EXPECT_EQ(tail_quotient(127, tail_reciprocal(0)), 0);  // unpacked: every row is head 0 of the tile
}

}  // namespace
