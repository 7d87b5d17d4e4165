// The order in which the persistent head-tiled GEMM (head_gemm_sm90.cuh) walks its units, as plain C++ for the
// device and the host tests alike. A unit is (row pair, head-pair tile); clusters take units round-robin, so the
// first `clusters` units are the first round.
//
// Natural order (lag 0): the tiles of one row pair, then the next row pair, so that a round of clusters works on
// neighbouring rows (their activations stay in L2).
//
// Lagged order: the tiles fall into early ones [0, early) and late ones [early, n_tiles). The late tiles (the
// audio operator's v, whose rounded weights the kernel may write itself while its first round runs:
// weight_prep.cuh) of the first `lag` row pairs wait behind those pairs' early tiles: first the early tiles of
// pairs 0 .. lag-1, then their late tiles, then the remaining pairs in natural order. With lag * early >= clusters
// the first round holds no late tile. (Not every pair's late tiles lag: a pair's activations would then be read a
// round apart, and L2 no longer keeps them; docs/perf-log.md v14.)
#pragma once

#if defined(__CUDACC__)
#define GK_UNIT_ORDER_FN __host__ __device__ __forceinline__
#else
#define GK_UNIT_ORDER_FN inline
#endif

namespace gk::head_gemm {

struct UnitOrder {
  int pairs = 0;    // row pairs
  int n_tiles = 0;  // head-pair tiles per row pair
  int early = 0;    // tiles [0, early) run first (lagged order only)
  int lag = 0;      // 0: natural order
};

struct UnitPos {
  int pair, tile;
};

GK_UNIT_ORDER_FN UnitPos unit_position(const UnitOrder& o, int u) {
  if (o.lag == 0) return UnitPos{u / o.n_tiles, u % o.n_tiles};
  const int a = o.early, b = o.n_tiles - o.early, lag = o.lag;
  if (u < a * lag) return UnitPos{u / a, u % a};
  u -= a * lag;
  if (u < b * lag) return UnitPos{u / b, a + u % b};
  u -= b * lag;
  return UnitPos{lag + u / o.n_tiles, u % o.n_tiles};
}

// The smallest lag that keeps late tiles out of the first round of `clusters`, at most every row pair; 0 (natural
// order) where there are no early or no late tiles.
GK_UNIT_ORDER_FN int unit_lag(int pairs, int n_tiles, int early, int clusters) {
  if (early <= 0 || early >= n_tiles || pairs < 1 || clusters < 1) return 0;
  const int lag = (clusters + early - 1) / early;
  return lag < pairs ? lag : pairs;
}

// Whether a first round of early tiles can hide work the late tiles wait for (the kernel's own rounding of their
// weights: weight_prep.cuh): more units than clusters, the first round whole units (stream-K, if any, from
// sk_unit0 >= clusters on; sk_run 0: none), and enough early tiles to fill it.
GK_UNIT_ORDER_FN bool first_round_early(long long units, long long pairs, long long early, int clusters,
                                        int sk_unit0, int sk_run) {
  return clusters > 0 && units > clusters && (sk_run == 0 || sk_unit0 >= clusters) && pairs * early >= clusters;
}

}  // namespace gk::head_gemm

#undef GK_UNIT_ORDER_FN
