// Host side of the persistent head-tiled GEMM (head_gemm_sm90.cuh): what it can take, its tensor maps, the grid
// (as many clusters of two as can be resident, never more than the units) and the launch. Included by the .cu
// file that instantiates the kernel with its epilogue.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cluster_launch.hpp"
#include "common/device_props.hpp"
#include "projection/head_gemm/head_gemm_sm90.cuh"
#include "projection/head_gemm/stream_k_plan.hpp"
#include "projection/head_gemm/unit_order.hpp"
#include "common/status_util.hpp"
#include "common/tensor_map.hpp"

namespace gk::head_gemm {

// A [m, k] and each weight [heads * 128, k], row-major and dense, in the kernel's element type.
struct Operands {
  int64_t m = 0, k = 0;
  const void* a = nullptr;
  int segments = 0;
  const void* w[Grid::kMaxSegments] = {};
  int64_t heads[Grid::kMaxSegments] = {};
  // tf32: the segments (bit s) whose A fragments are rounded to nearest; the others' are read as the tensor cores
  // truncate them.
  unsigned round_a_segments = (1u << Grid::kMaxSegments) - 1;
  // Stream-K (stream_k.cuh) where stream_k_plan.hpp takes it: its state and partial tiles in `sk_scratch`
  // (sk_scratch_bytes, 256-byte aligned; none: whole units round-robin), tagged with `sk_epoch`.
  void* sk_scratch = nullptr;
  size_t sk_scratch_bytes = 0;
  uint64_t sk_epoch = 0;
  bool sk_any_fill = false;  // stream-K whatever the last round's fill (for measurements)
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
// The preparation's slots in a scratch of `bytes` (null where it is too small).
inline unsigned long long* prep_slots_in(void* scratch, size_t bytes) {
  return scratch != nullptr && bytes >= kSkPartialsAt
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
  const int64_t k_unit = Cfg::kTf32 ? 2 * Cfg::kBK : Cfg::kBK;
  if (o.segments < 1 || o.segments > Grid::kMaxSegments || o.m < 1 || o.m > INT32_MAX - 2 * Cfg::kBM) return false;
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

// Resident clusters of the kernel with this epilogue (its shared-memory opt-in set on the way).
template <class Cfg, class Epilogue>
Status resident_clusters(const char* op, int* clusters) {
  const auto kernel = reinterpret_cast<const void*>(head_gemm_kernel<Cfg, Epilogue>);
  GK_RETURN_IF_ERROR(detail::set_smem_opt_in(op, kernel, Cfg::kSmemBytes));
  return detail::max_active_clusters(op, kernel, Cfg::kThreads, Cfg::kSmemBytes, Cfg::kClusterSize, clusters);
}

// The clusters a launch takes and its stream-K plan (run 0: whole units round-robin).
struct GridPlan {
  int clusters = 0;
  StreamKPlan sk;
};
inline GridPlan plan_grid(const Operands& o, int units, int k_blocks, int resident) {
  GridPlan plan;
  plan.clusters = resident < units ? resident : units;
  if (o.sk_scratch != nullptr) {
    const StreamKPlan sk = plan_stream_k(units, k_blocks, resident, o.sk_any_fill);
    if (sk.run > 0 && resident - 1 <= sk_boundaries(o.sk_scratch_bytes)) {
      plan.clusters = resident;
      plan.sk = sk;
    }
  }
  return plan;
}

// Whether the kernel's own weight preparation of the last segment (Operands::prep_seg) beats a pass before it:
// where a first round of the other segments' tiles hides it, that is past one round of units, with the first round
// whole units and the other segments' tiles enough to fill it. In one round (M = 1024 in the audio suite) the
// prepared segment's tiles wait for it from the start (+3 us against the pass), and with stream-K from the first
// unit on (M = 2048) +0.5 us (docs/perf-log.md v14).
template <class Cfg, class Epilogue>
Status prep_pays(const char* op, const Operands& o, bool* pays) {
  *pays = false;
  if (!shape_supported<Cfg>(o) || o.segments < 2) return Status::Ok();
  int resident = 0;
  GK_RETURN_IF_ERROR((resident_clusters<Cfg, Epilogue>(op, &resident)));
  const int64_t units = units_of<Cfg>(o);
  if (resident < 1 || !prep_slots_fit(resident)) return Status::Ok();
  int64_t early = 0;
  for (int s = 0; s + 1 < o.segments; ++s) early += head_tiles<Cfg>(o.heads[s]);
  const GridPlan plan = plan_grid(o, static_cast<int>(units), static_cast<int>(o.k / Cfg::kBK), resident);
  *pays = first_round_early(units, row_pairs<Cfg>(o), early, plan.clusters, plan.sk.unit0, plan.sk.run);
  return Status::Ok();
}

template <class Cfg, class Epilogue>
// `after_pdl_producer`: the previous kernel in the stream produced the weights and triggers its dependents early
// (device::launch_dependents); this launch then overlaps that kernel's end with its own start, and its producer
// waits for the weights (grid_dependency_wait) before loading any.
Status launch(const char* op, const Operands& o, const typename Epilogue::Params& ep, cudaStream_t stream,
              bool after_pdl_producer = false) {
  if (!supported<Cfg>(o)) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: operands outside the head-tiled GEMM's support", op);
  }
  if (Cfg::kPingPong && (o.sk_scratch != nullptr || o.prep_seg >= 0)) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: the ping-pong head GEMM takes whole units only", op);
  }
  Grid g{};
  g.m = static_cast<int>(o.m);
  g.k_blocks = static_cast<int>(o.k / Cfg::kBK);
  int end = 0;
  for (int s = 0; s < Grid::kMaxSegments; ++s) {
    if (s < o.segments) end += static_cast<int>(head_tiles<Cfg>(o.heads[s]));
    g.seg_end[s] = end;
    g.seg_heads[s] = s < o.segments ? static_cast<int>(o.heads[s]) : 0;
  }
  g.n_tiles = end;
  g.units = static_cast<int>(units_of<Cfg>(o));
  g.round_a_segments = o.round_a_segments;

  constexpr auto kType = Cfg::kTf32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const uint64_t k = uint64_t(o.k), stride[1] = {k * Cfg::kElemBytes};
  // 128 rows of A; W: the rows each CTA multicasts (one head, or half of one).
  const uint32_t box[2] = {Cfg::kBK, 128}, w_box[2] = {Cfg::kBK, Cfg::kBRowsPerRank};
  CUtensorMap a_map, w_map[Grid::kMaxSegments];
  const uint64_t a_dims[2] = {k, uint64_t(o.m)};
  GK_RETURN_IF_ERROR(detail::encode_tiled_map(op, &a_map, kType, 2, o.a, a_dims, stride, box));
  for (int s = 0; s < Grid::kMaxSegments; ++s) {
    const int src = s < o.segments ? s : 0;  // unused slots repeat segment 0's map: never read
    const uint64_t w_dims[2] = {k, uint64_t(o.heads[src]) * Cfg::kHeadDim};
    GK_RETURN_IF_ERROR(detail::encode_tiled_map(op, &w_map[s], kType, 2, o.w[src], w_dims, stride, w_box));
  }

  const auto kernel = head_gemm_kernel<Cfg, Epilogue>;
  int resident = 0;
  GK_RETURN_IF_ERROR((resident_clusters<Cfg, Epilogue>(op, &resident)));
  if (resident < 1) {
    return detail::error(GK_STATUS_CUDA_ERROR, "%s: no cluster of the head-tiled GEMM can be resident", op);
  }
  const GridPlan plan = plan_grid(o, g.units, g.k_blocks, resident);
  const int clusters = plan.clusters;
  g.sk_unit0 = plan.sk.unit0;
  g.sk_run = plan.sk.run;
  if (plan.sk.run > 0) {
    g.sk.flags = static_cast<unsigned long long*>(o.sk_scratch);
    g.sk.partials = reinterpret_cast<float*>(static_cast<char*>(o.sk_scratch) + kSkPartialsAt);
    g.sk.epoch = o.sk_epoch & ((uint64_t(1) << 56) - 1);
  }
  g.order = UnitOrder{static_cast<int>(row_pairs<Cfg>(o)), g.n_tiles, 0, 0};
  g.prep = WeightPrep{};
  g.prep.seg = -1;
  if (o.prep_seg >= 0) {
    const int s = o.prep_seg;
    if (!Cfg::kTf32 || s != o.segments - 1 || !aligned16(o.prep_src) || o.prep_slots == nullptr ||
        !prep_slots_fit(clusters)) {
      return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: a weight preparation the head-tiled GEMM cannot take", op);
    }
    g.prep.src = static_cast<const uint4*>(o.prep_src);
    g.prep.dst = static_cast<uint4*>(const_cast<void*>(o.w[s]));
    g.prep.vec = static_cast<long long>(o.heads[s] * Cfg::kHeadDim * o.k / 4);  // K is whole K-blocks
    g.prep.slots = device::EpochSlots{o.prep_slots, o.prep_epoch, 2u * static_cast<unsigned>(clusters)};
    g.prep.seg = s;
    g.prep.wait_ns = o.prep_wait_ns;
  }
  if (o.lag_last_segment && o.segments >= 2 && (o.prep_seg >= 0 || plan.sk.run > 0)) {
    g.order.early = g.seg_end[o.segments - 2];
    g.order.lag = unit_lag(g.order.pairs, g.n_tiles, g.order.early, clusters);
  }
  const dim3 grid(static_cast<unsigned>(clusters), 1, Cfg::kClusterSize);
  return detail::launch_z_clusters(op, "head-tiled GEMM launch", kernel, grid, Cfg::kThreads, Cfg::kSmemBytes,
                                   /*cluster=*/true, after_pdl_producer, stream, a_map, w_map[0], w_map[1], w_map[2],
                                   g, ep);
}

}  // namespace gk::head_gemm
