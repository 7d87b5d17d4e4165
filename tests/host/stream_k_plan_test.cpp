// The persistent GEMM's stream-K plan (src/projection/head_gemm/stream_k_plan.hpp): where it is taken, and the
// invariants the kernel's meeting of cut units relies on, walked the way the kernel walks the runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "projection/head_gemm/stream_k_plan.hpp"

namespace {

using gk::head_gemm::plan_stream_k;

TEST(StreamKPlan, TakenWhereTheLastRoundIsAtMostSixTenthsFull) {
  // The audio suite on the H200's 66 clusters, 32 K-blocks a unit: M = 2048 (96 units) and M = 6184 (300 units, a
  // last round of 36) qualify.
  EXPECT_EQ(plan_stream_k(96, 32, 66).run, 48);
  EXPECT_EQ(plan_stream_k(96, 32, 66).unit0, 0);
  EXPECT_GT(plan_stream_k(300, 32, 66).run, 0);
  EXPECT_EQ(plan_stream_k(300, 32, 66).unit0, 198);
  for (int units : {108, 192, 384}) EXPECT_EQ(plan_stream_k(units, 32, 66).run, 0) << units;
  EXPECT_GT(plan_stream_k(66 + 39, 32, 66).run, 0);  // 39 / 66 = 0.59
  EXPECT_EQ(plan_stream_k(66 + 40, 32, 66).run, 0);  // 0.61
  EXPECT_EQ(plan_stream_k(132, 32, 66).run, 0);  // whole rounds
  EXPECT_EQ(plan_stream_k(48, 32, 66).run, 0);   // one round
  const auto p = plan_stream_k(144, 32, 66);  // 3000 rows: a round of whole units first
  EXPECT_EQ(p.unit0, 66);
  EXPECT_GT(p.run, 0);
  EXPECT_EQ(plan_stream_k(96, 31, 66).run, 0);  // odd K-block counts stay round-robin
  EXPECT_EQ(plan_stream_k(96, 32, 1).run, 0);
}

TEST(StreamKPlan, EveryKBlockOnceAndEveryCutMeetsOnce) {
  for (int k_blocks : {2, 4, 16, 32, 34}) {
    for (int clusters : {2, 3, 7, 66, 80}) {
      for (int units = 1; units <= 4 * clusters + 3; ++units) {
        const auto plan = plan_stream_k(units, k_blocks, clusters);
        if (plan.run == 0) continue;
        ASSERT_EQ(plan.run % 2, 0);
        ASSERT_EQ(plan.unit0 % clusters, 0);
        ASSERT_LT(plan.unit0, units);
        // Walk each cluster's run into pieces as the kernel does, and count what covers each K-block and which
        // pieces meet at each boundary.
        const int64_t base = int64_t(plan.unit0) * k_blocks, total = int64_t(units) * k_blocks;
        std::vector<int> cover(size_t(total - base), 0), meets(size_t(clusters) + 1, 0);
        for (int c = 0; c < clusters; ++c) {
          int64_t next = std::min(base + int64_t(c) * plan.run, total);
          const int64_t stop = std::min(next + plan.run, total);
          while (next < stop) {
            const int kb0 = int(next % k_blocks);
            const int kb1 = int(std::min<int64_t>(k_blocks, kb0 + (stop - next)));
            ASSERT_FALSE(kb0 > 0 && kb1 < k_blocks) << "a piece inside a unit: units " << units << " clusters "
                                                    << clusters << " k_blocks " << k_blocks;
            ASSERT_EQ((kb1 - kb0) % 2, 0);
            if (kb0 > 0) ++meets[size_t(c)];
            if (kb1 < k_blocks) {
              ASSERT_LT(c + 1, clusters);
              ++meets[size_t(c) + 1];
            }
            for (int64_t i = next; i < next + (kb1 - kb0); ++i) ++cover[size_t(i - base)];
            next += kb1 - kb0;
          }
        }
        for (int v : cover) ASSERT_EQ(v, 1);
        ASSERT_EQ(meets[0], 0);
        for (int c = 1; c < clusters; ++c) ASSERT_TRUE(meets[size_t(c)] == 0 || meets[size_t(c)] == 2) << c;
      }
    }
  }
}

}  // namespace
