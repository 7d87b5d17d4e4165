// Host side of the persistent head-tiled GEMM (head_gemm_sm90.cuh): what it can take, its tensor maps, the grid
// (as many clusters of two as can be resident, never more than the units) and the launch, prepared as a value. Included by the .cu
// file that instantiates the kernel with its epilogue.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/device_props.hpp"
#include "common/kernel_launch.hpp"
#include "projection/head_gemm/head_gemm_sm90.cuh"
#include "projection/head_gemm/head_gemm_plan.hpp"
#include "common/status_util.hpp"
#include "common/tensor_map.hpp"

namespace gk::head_gemm {

// Resident clusters of the kernel with this epilogue (its shared-memory opt-in set on the way): at handle creation.
template <class Cfg, class Epilogue>
Status resident_clusters(const char* op, int* clusters) {
  const auto kernel = reinterpret_cast<const void*>(head_gemm_kernel<Cfg, Epilogue>);
  return detail::max_active_clusters(op, kernel, Cfg::kThreads, Cfg::kSmemBytes, Cfg::kClusterSize, clusters);
}

template <class Cfg, class Epilogue>
// `after_pdl_producer`: the previous kernel in the stream produced the weights and triggers its dependents early
// (device::launch_dependents); this launch then overlaps that kernel's end with its own start, and its producer
// waits for the weights (grid_dependency_wait) before loading any.
// `plan`: the grid the planner chose (plan_grid, head_gemm_plan.hpp).
Status prepare(const char* op, const Operands& o, const GridPlan& plan, const typename Epilogue::Params& ep,
               bool after_pdl_producer, detail::KernelLaunch* out) {
  static_assert(Cfg::kBM == Tf32Tiling::kBM && Cfg::kBK == Tf32Tiling::kBK && Cfg::kHeadsPerTile == Tf32Tiling::kHeadsPerTile &&
                    Cfg::kHeadDim == Tf32Tiling::kHeadDim && Cfg::kClusterSize == Tf32Tiling::kClusterSize,
                "the planners' tiling (head_gemm_plan.hpp) is the kernel's");
  if (!supported<Cfg>(o)) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: operands outside the head-tiled GEMM's support", op);
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

  constexpr auto kType = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
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
  const int clusters = plan.clusters;
  if (clusters < 1 || (plan.sk.run > 0 && (o.sk_scratch == nullptr || clusters - 1 > sk_boundaries(o.sk_scratch_bytes)))) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: a grid plan the head-tiled GEMM cannot take", op);
  }
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
    if (s != o.segments - 1 || !aligned16(o.prep_src) || o.prep_slots == nullptr ||
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
  *out = detail::KernelLaunch("head-tiled GEMM launch", kernel,
                              {grid, Cfg::kThreads, Cfg::kSmemBytes, /*cluster_z=*/true, after_pdl_producer}, a_map,
                              w_map[0], w_map[1], w_map[2], g, ep);
  return Status::Ok();
}

}  // namespace gk::head_gemm
