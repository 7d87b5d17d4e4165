// The bounded plan cache (common/lru_cache.hpp): it never holds more than its capacity, forgets the entry used
// longest ago, and a hit counts as a use. The GEMM runner keys it by the whole shape, so a server with changing
// token counts would otherwise grow it without end.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/lru_cache.hpp"

namespace {

using gk::detail::LruCache;

TEST(LruCache, FindsWhatWasInsertedAndNothingElse) {
  LruCache<int, std::string> cache(4);
  EXPECT_EQ(cache.find(1), nullptr);
  cache.insert(1, "one");
  cache.insert(2, "two");
  ASSERT_NE(cache.find(1), nullptr);
  EXPECT_EQ(*cache.find(1), "one");
  EXPECT_EQ(*cache.find(2), "two");
  EXPECT_EQ(cache.find(3), nullptr);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(LruCache, ForgetsTheLeastRecentlyUsedWhenFull) {
  LruCache<int, int> cache(3);
  for (int k = 0; k < 3; ++k) cache.insert(k, 10 * k);
  ASSERT_NE(cache.find(0), nullptr);  // 0 is now the most recent: 1 is the oldest
  cache.insert(3, 30);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.find(1), nullptr);
  ASSERT_NE(cache.find(0), nullptr);
  EXPECT_EQ(*cache.find(0), 0);
  EXPECT_EQ(*cache.find(2), 20);
  EXPECT_EQ(*cache.find(3), 30);
  // Found in the order 0, 2, 3: 0 is now the one used longest ago.
  cache.insert(4, 40);
  EXPECT_EQ(cache.find(0), nullptr);
  EXPECT_NE(cache.find(2), nullptr);
  EXPECT_NE(cache.find(3), nullptr);
  EXPECT_NE(cache.find(4), nullptr);
}

TEST(LruCache, NeverGrowsPastItsCapacity) {
  LruCache<long, long> cache(16);
  for (long k = 0; k < 10000; ++k) {
    cache.insert(k, k);
    ASSERT_LE(cache.size(), 16u);
  }
  for (long k = 10000 - 16; k < 10000; ++k) EXPECT_NE(cache.find(k), nullptr) << k;
  EXPECT_EQ(cache.find(10000 - 17), nullptr);
}

TEST(LruCache, InsertingAnExistingKeyReplacesItsValue) {
  LruCache<int, int> cache(2);
  cache.insert(1, 1);
  cache.insert(2, 2);
  EXPECT_EQ(cache.insert(1, 100), 100);  // replaced, and now the most recent
  EXPECT_EQ(cache.size(), 2u);
  cache.insert(3, 3);                    // forgets 2
  EXPECT_EQ(cache.find(2), nullptr);
  EXPECT_EQ(*cache.find(1), 100);
}

TEST(LruCache, AForgottenSharedValueLivesOnWhileHeld) {
  LruCache<int, std::shared_ptr<const int>> cache(1);
  cache.insert(1, std::make_shared<const int>(7));
  const std::shared_ptr<const int> held = *cache.find(1);
  cache.insert(2, std::make_shared<const int>(8));  // forgets 1
  EXPECT_EQ(cache.find(1), nullptr);
  EXPECT_EQ(*held, 7);
}

TEST(LruCache, ZeroCapacityMeansOne) {
  LruCache<int, int> cache(0);
  EXPECT_EQ(cache.capacity(), 1u);
  cache.insert(1, 1);
  cache.insert(2, 2);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(*cache.find(2), 2);
}

}  // namespace
