// The persistent GEMM's unit order (src/projection/head_gemm/unit_order.hpp): every (row pair, tile) exactly once, and
// in the lagged order no late tile in the first round wherever the early tiles can fill it, and a late tile never
// ahead of its row pair's early tiles; and which shapes have such a first round (first_round_early).
#include <gtest/gtest.h>

#include <vector>

#include "projection/head_gemm/stream_k_plan.hpp"
#include "projection/head_gemm/unit_order.hpp"

namespace {

using gk::head_gemm::first_round_early;
using gk::head_gemm::plan_stream_k;
using gk::head_gemm::unit_lag;
using gk::head_gemm::unit_position;
using gk::head_gemm::UnitOrder;
using gk::head_gemm::UnitPos;

TEST(UnitOrder, NaturalOrderIsRowPairMajor) {
  const UnitOrder o{5, 12, 0, 0};
  for (int u = 0; u < 60; ++u) {
    const UnitPos p = unit_position(o, u);
    EXPECT_EQ(p.pair, u / 12);
    EXPECT_EQ(p.tile, u % 12);
  }
}

TEST(UnitOrder, LagForTheAudioSuiteOn66Clusters) {
  // 8 early tiles (q, k: 4 head pairs each) and 4 late ones (v): 9 row pairs of q and k fill the first round.
  EXPECT_EQ(unit_lag(32, 12, 8, 66), 9);  // M = 8192
  EXPECT_EQ(unit_lag(9, 12, 8, 66), 9);   // M = 2164
  EXPECT_EQ(unit_lag(4, 12, 8, 66), 4);   // M = 1024: every q and k tile first
  EXPECT_EQ(unit_lag(4, 12, 0, 66), 0);   // nothing early, or nothing late: natural order
  EXPECT_EQ(unit_lag(4, 12, 12, 66), 0);
}

TEST(UnitOrder, LaggedOrderIsAPermutationWithLateTilesBehind) {
  for (int n_tiles : {2, 3, 12, 13}) {
    for (int early = 1; early < n_tiles; ++early) {
      for (int pairs = 1; pairs <= 40; ++pairs) {
        for (int clusters : {1, 7, 66, 200}) {
          const int lag = unit_lag(pairs, n_tiles, early, clusters);
          ASSERT_GE(lag, 1);
          ASSERT_LE(lag, pairs);
          const UnitOrder o{pairs, n_tiles, early, lag};
          const int units = pairs * n_tiles;
          std::vector<int> seen(units, 0), early_done(pairs, 0);
          for (int u = 0; u < units; ++u) {
            const UnitPos p = unit_position(o, u);
            ASSERT_GE(p.pair, 0);
            ASSERT_LT(p.pair, pairs);
            ASSERT_GE(p.tile, 0);
            ASSERT_LT(p.tile, n_tiles);
            ++seen[p.pair * n_tiles + p.tile];
            if (p.tile < early) {
              ++early_done[p.pair];
            } else {
              ASSERT_EQ(early_done[p.pair], early) << "a late tile ahead of its row pair's early tiles";
            }
            if (u < clusters && u < pairs * early) {
              ASSERT_LT(p.tile, early) << "late tile " << u << " in the first round of " << clusters;
            }
          }
          for (int i = 0; i < units; ++i) ASSERT_EQ(seen[i], 1) << "unit " << i;
        }
      }
    }
  }
}

// Where the persistent audio kernel rounds v's weights itself (prep_pays), for the audio suite's row counts on the
// H200's 66 clusters: 12 head-pair tiles per row pair (8 of q and k), 32 K-blocks a unit, stream-K as planned.
TEST(UnitOrder, FirstRoundOfQAndKTilesForTheAudioSuite) {
  const auto takes = [](long long rows) {
    const long long pairs = (rows + 255) / 256, units = pairs * 12;
    const auto sk = plan_stream_k(static_cast<int>(units), 32, 66);
    return first_round_early(units, pairs, 8, 66, sk.unit0, sk.run);
  };
  EXPECT_FALSE(takes(1024));  // 48 units: one round, v's tiles in it
  EXPECT_FALSE(takes(2048));  // stream-K from the first unit
  for (long long rows : {2164, 3000, 4096, 6184, 8192}) EXPECT_TRUE(takes(rows)) << rows;
  EXPECT_FALSE(first_round_early(200, 5, 8, 66, 0, 0));  // 40 q and k tiles cannot fill 66 clusters
}

}  // namespace
