// Host side of the persistent head-tiled GEMM that the planners use: what it can take, how its units fall on the
// resident clusters, the stream-K plan and whether the kernel rounds a segment's weights itself. Plain C++ (the
// device code is head_gemm_sm90.cuh, the launch head_gemm_launch.cuh), so the planners and host tests call it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "projection/head_gemm/stream_k_plan.hpp"
#include "projection/head_gemm/unit_order.hpp"

namespace gk::head_gemm {

inline constexpr int kMaxSegments = 3;

// The tf32 configuration's tiling, as the planners see it (head_gemm_launch.cuh checks it against the kernel's).
struct Tf32Tiling {
  static constexpr int kBM = 128, kHeadDim = 128, kHeadsPerTile = 2, kBK = 32, kClusterSize = 2;
};

// A [m, k] and each weight [heads * 128, k], row-major and dense, in the kernel's element type.
struct Operands {
  int64_t m = 0, k = 0;
  const void* a = nullptr;
  int segments = 0;
  const void* w[kMaxSegments] = {};
  int64_t heads[kMaxSegments] = {};
  // tf32: the segments (bit s) whose A fragments are rounded to nearest; the others' are read as the tensor cores
  // truncate them.
  unsigned round_a_segments = (1u << kMaxSegments) - 1;
  // Stream-K (stream_k.cuh) where stream_k_plan.hpp takes it: its state and partial tiles in `sk_scratch`
  // (sk_scratch_bytes, 256-byte aligned; none: whole units round-robin), tagged with `sk_epoch`.
  void* sk_scratch = nullptr;
  size_t sk_scratch_bytes = 0;
  uint64_t sk_epoch = 0;
  // tf32: the kernel itself rounds segment `prep_seg`'s weights (the last segment) from `prep_src` into w[prep_seg]
  // (weight_prep.cuh), handing the slices over on `prep_slots` (one per CTA: prep_slots_in) under `prep_epoch`.
  // -1: the weights are read as given. Epoch-tagged: not for a launch under stream capture.
  // `lag_last_segment`: the last segment's tiles of the first row pairs wait behind the other segments' tiles
  // (unit_order.hpp), so that a first round without them hides the preparation. Set from the shape alone
  // (prep_pays), not from whether the kernel prepares, and taken where the kernel prepares or stream-K runs: the
  // order decides which tiles stream-K cuts, hence the bits, and a call must give the same bits with the
  // preparation as with a pass before it (under capture, or pinned); with whole units only, the order changes no
  // bit and the pass keeps the natural order.
  bool lag_last_segment = false;
  int prep_seg = -1;
  const void* prep_src = nullptr;
  unsigned long long* prep_slots = nullptr;
  uint64_t prep_epoch = 0;
  uint64_t prep_wait_ns = 200000;  // how long a CTA waits for the others' slices before rounding them itself
};

// The scratch of stream-K and of the weight preparation: stream-K's state words, the preparation's slots, then
// stream-K's partial tiles, one 128 x 256 fp32 tile per (boundary, rank).
inline constexpr size_t kSkFlagBytes = 4096;                      // up to 256 boundaries x 2 ranks x 8 bytes
inline constexpr size_t kPrepSlotBytes = 4096;                    // up to 512 CTAs x 8 bytes
inline constexpr size_t kSkPartialsAt = kSkFlagBytes + kPrepSlotBytes;
inline constexpr size_t kSkPartialBytes = size_t(128) * 256 * 4;  // one CTA's tile
// The boundaries a scratch of `bytes` holds state and partials for.
inline int64_t sk_boundaries(size_t bytes) {
  if (bytes <= kSkPartialsAt) return 0;
  const int64_t by_partials = int64_t((bytes - kSkPartialsAt) / (2 * kSkPartialBytes));
  const int64_t by_flags = int64_t(kSkFlagBytes / 16);
  return by_partials < by_flags ? by_partials : by_flags;
}
// Whether the preparation's slots hold one per CTA of `clusters` clusters of two.
inline bool prep_slots_fit(int64_t clusters) { return 2 * clusters * 8 <= int64_t(kPrepSlotBytes); }
// Whether a scratch of `bytes` holds the preparation's slots.
inline bool has_prep_slots(size_t bytes) { return bytes >= kSkPartialsAt; }
// The preparation's slots in a scratch of `bytes` (null where it is too small).
inline unsigned long long* prep_slots_in(void* scratch, size_t bytes) {
  return scratch != nullptr && has_prep_slots(bytes)
             ? reinterpret_cast<unsigned long long*>(static_cast<char*>(scratch) + kSkFlagBytes)
             : nullptr;
}

// The tiles of a segment of `heads` heads: head pairs, or heads (ping-pong).
template <class Cfg>
int64_t head_tiles(int64_t heads) {
  return (heads + Cfg::kHeadsPerTile - 1) / Cfg::kHeadsPerTile;
}
inline bool aligned16(const void* p) { return p != nullptr && reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The row pairs of A: ceil(row tiles / 2).
template <class Cfg>
int64_t row_pairs(const Operands& o) {
  return (o.m + 2 * Cfg::kBM - 1) / (2 * Cfg::kBM);
}

// The units a launch walks: the row pairs times the head tiles of every segment.
template <class Cfg>
int64_t units_of(const Operands& o) {
  int64_t n_tiles = 0;
  for (int s = 0; s < o.segments; ++s) n_tiles += head_tiles<Cfg>(o.heads[s]);
  return row_pairs<Cfg>(o) * n_tiles;
}

// Sizes the grid can take: K in whole K-blocks (pairs of them for tf32) and counts that fit the kernel's ints.
// The pointers are not looked at.
template <class Cfg>
bool shape_supported(const Operands& o) {
  const int64_t k_unit = 2 * Cfg::kBK;  // the tf32 loop takes K-blocks in pairs
  if (o.segments < 1 || o.segments > kMaxSegments || o.m < 1 || o.m > INT32_MAX - 2 * Cfg::kBM) return false;
  if (o.k < k_unit || o.k % k_unit != 0 || o.k > INT32_MAX) return false;
  for (int s = 0; s < o.segments; ++s) {
    if (o.heads[s] < 1 || o.heads[s] * Cfg::kHeadDim > INT32_MAX) return false;
  }
  return units_of<Cfg>(o) <= INT32_MAX;
}

// shape_supported, and operands TMA can read: present and 16-byte aligned (the row pitch K * element size is a
// multiple of 16 bytes once K is whole K-blocks).
template <class Cfg>
bool supported(const Operands& o) {
  if (!shape_supported<Cfg>(o) || !aligned16(o.a)) return false;
  for (int s = 0; s < o.segments; ++s) {
    if (!aligned16(o.w[s])) return false;
  }
  return true;
}

// How the units of a shape fall on the resident clusters: rounds = ceil(units / clusters), fill = units /
// (rounds * clusters), the share of the cluster-rounds that do work.
inline void unit_rounds(int64_t units, int clusters, int64_t* rounds, double* fill) {
  *rounds = clusters > 0 ? (units + clusters - 1) / clusters : 0;
  *fill = *rounds > 0 ? double(units) / double(*rounds * clusters) : 0.0;
}

// The clusters a launch takes and its stream-K plan (run 0: whole units round-robin).
struct GridPlan {
  int clusters = 0;
  StreamKPlan sk;
};
// `sk_scratch_bytes` 0: whole units round-robin.
inline GridPlan plan_grid(int units, int k_blocks, int resident, size_t sk_scratch_bytes) {
  GridPlan plan;
  plan.clusters = resident < units ? resident : units;
  if (sk_scratch_bytes > 0) {
    const StreamKPlan sk = plan_stream_k(units, k_blocks, resident);
    if (sk.run > 0 && resident - 1 <= sk_boundaries(sk_scratch_bytes)) {
      plan.clusters = resident;
      plan.sk = sk;
    }
  }
  return plan;
}

// Whether the kernel's own preparation of the last segment's weights (Operands::prep_seg) beats a pass before it:
// where a first round of the other segments' tiles hides it, i.e. past one round of units, with the first round
// whole units and the other segments' tiles enough to fill it (docs/perf-log.md v14). `plan`: the launch's grid.
template <class Cfg>
bool prep_pays(const Operands& o, const GridPlan& plan, int resident) {
  if (!shape_supported<Cfg>(o) || o.segments < 2 || resident < 1 || !prep_slots_fit(resident)) return false;
  int64_t early = 0;
  for (int s = 0; s + 1 < o.segments; ++s) early += head_tiles<Cfg>(o.heads[s]);
  return first_round_early(units_of<Cfg>(o), row_pairs<Cfg>(o), early, plan.clusters, plan.sk.unit0, plan.sk.run);
}

}  // namespace gk::head_gemm
