// Launch and path choice of the layer's fused projection kernels: the split kernel (splitk_proj_gemm_sm90.cuh; its K split,
// a cluster of CTAs along z, is chosen from the grid the tiles alone would give, so that a single row tile still
// spreads the weight stream over most SMs) and the persistent head-tiled GEMM (projection/head_gemm) with the
#include <cuda_runtime.h>

#include "common/cluster_launch.hpp"
#include "common/cuda_check.hpp"
#include "common/device_props.hpp"
#include "common/env_choice.hpp"
#include "common/tensor_map.hpp"
#include "projection/projection.hpp"
#include "projection/splitk_proj_gemm_sm90.cuh"

namespace gk::gemma3 {

namespace {

constexpr const char* kOp = "gemma3_attention";
constexpr int64_t kMaxRowTiles = 65535;  // grid.y
// One row tile: one head per tile, and the only size where the fused kernel beats cuBLASLt by default.
constexpr int64_t kSingleTileRows = 128;

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

struct Maps {
  CUtensorMap a, w[ProjGemmParams::kMaxSegments];
};

template <int kHeads>
Status encode_maps(const ProjGemmOperands& o, Maps* maps) {
  using Tr = ProjGemmTraits<kHeads>;
  const uint64_t k = uint64_t(o.k), stride[1] = {k * 2};
  const uint32_t a_box[2] = {Tr::kBK, Tr::kBM}, w_box[2] = {Tr::kBK, Tr::kBN};  // W: the tile's heads in one box
  constexpr auto kBf16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const uint64_t a_dims[2] = {k, uint64_t(o.m)};
  GK_RETURN_IF_ERROR(detail::encode_tiled_map(kOp, &maps->a, kBf16, 2, o.a, a_dims, stride, a_box));
  for (int s = 0; s < ProjGemmParams::kMaxSegments; ++s) {
    // Unused slots repeat segment 0's map: the kernel never reads them. Rows past the segment read as zeros.
    const int src = s < o.segments ? s : 0;
    const uint64_t w_dims[2] = {k, uint64_t(o.heads[src]) * Tr::kHeadDim};
    GK_RETURN_IF_ERROR(detail::encode_tiled_map(kOp, &maps->w[s], kBf16, 2, o.w[src], w_dims, stride, w_box));
  }
  return Status::Ok();
}

template <int kHeads, bool kSplit>
Status launch(const ProjGemmParams& p, const Maps& maps, dim3 grid, cudaStream_t stream) {
  using Tr = ProjGemmTraits<kHeads>;
  return detail::launch_z_clusters(kOp, "projection gemm launch", proj_gemm_kernel<kHeads, kSplit>, grid, Tr::kThreads,
                                   Tr::kSmemBytes, kSplit, /*programmatic=*/false, stream, maps.a, maps.w[0], maps.w[1],
                                   maps.w[2], p);
}

int64_t segment_tiles(int64_t heads, int heads_per_tile) { return (heads + heads_per_tile - 1) / heads_per_tile; }

int64_t total_tiles(const ProjGemmOperands& o, int heads_per_tile) {
  int64_t n = 0;
  for (int s = 0; s < o.segments; ++s) n += segment_tiles(o.heads[s], heads_per_tile);
  return n;
}

// Heads per tile: two halve the activation tile's share of each SM's L2 traffic, which bounds the kernel once
// there are several row tiles (M = 8192: 570 against 480 TFLOP/s); with a single row tile one head per tile
// measured faster (M = 128, q|k|v: 20 against 24 us). docs/perf-log.md, v4.
int heads_per_tile(const ProjGemmOperands& o) { return o.m <= kSingleTileRows ? 1 : 2; }

template <int kHeads>
Status launch_heads(const ProjGemmOperands& o, cudaStream_t stream) {
  using Tr = ProjGemmTraits<kHeads>;
  Maps maps;
  GK_RETURN_IF_ERROR(encode_maps<kHeads>(o, &maps));
  ProjGemmParams p{};
  p.m = static_cast<int>(o.m);
  int end = 0;
  for (int s = 0; s < ProjGemmParams::kMaxSegments; ++s) {
    if (s < o.segments) end += static_cast<int>(segment_tiles(o.heads[s], kHeads));
    p.seg_end[s] = end;
    p.seg_heads[s] = s < o.segments ? static_cast<int>(o.heads[s]) : 0;
    p.out[s] = s < o.segments ? o.out[s] : nullptr;
    p.norm_weight[s] = s < o.segments ? o.norm_weight[s] : nullptr;
  }
  p.out_row_stride = o.out_row_stride;
  p.cos = o.cos;
  p.sin = o.sin;
  p.eps = o.eps;
  p.weight_offset = o.weight_offset;
  p.l2_prefetch = o.l2_prefetch;
  p.l2_prefetch_bytes = o.l2_prefetch_bytes;

  const int64_t m_tiles = (o.m + Tr::kBM - 1) / Tr::kBM;
  const int64_t n_tiles = total_tiles(o, kHeads);
  p.k_blocks = static_cast<int>(o.k / Tr::kBK);
  // Any cluster size up to the portable 8; the kernel shares the K-blocks out unevenly where they do not divide.
  int split = 1;
  GK_RETURN_IF_ERROR(detail::choose_cluster_split(
      kOp, reinterpret_cast<const void*>(proj_gemm_kernel<kHeads, true>), Tr::kThreads, Tr::kSmemBytes,
      m_tiles * n_tiles, p.k_blocks, {8, 7, 6, 5, 4, 3, 2}, /*even_k=*/false, &split));
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(m_tiles), static_cast<unsigned>(split));
  return split > 1 ? launch<kHeads, true>(p, maps, grid, stream) : launch<kHeads, false>(p, maps, grid, stream);
}

bool split_supported(const ProjGemmOperands& o) {
  constexpr int kBM = ProjGemmTraits<1>::kBM, kBK = ProjGemmTraits<1>::kBK;
  if (o.segments < 1 || o.segments > ProjGemmParams::kMaxSegments) return false;
  if (o.m < 1 || o.m > kMaxRowTiles * kBM || o.k < 2 * kBK || o.k % kBK != 0 || o.k > INT32_MAX) return false;
  if (o.a == nullptr || !aligned16(o.a) || o.out_row_stride % 4 != 0 || o.out_row_stride > INT32_MAX) return false;
  bool normed = false;
  for (int s = 0; s < o.segments; ++s) {
    if (o.heads[s] < 1 || o.w[s] == nullptr || o.out[s] == nullptr || !aligned16(o.w[s]) ||
        reinterpret_cast<uintptr_t>(o.out[s]) % 8 != 0) {
      return false;
    }
    if (o.norm_weight[s] != nullptr && reinterpret_cast<uintptr_t>(o.norm_weight[s]) % 8 != 0) return false;
    normed = normed || o.norm_weight[s] != nullptr;
  }
  if (normed && (o.cos == nullptr || o.sin == nullptr || reinterpret_cast<uintptr_t>(o.cos) % 8 != 0 ||
                 reinterpret_cast<uintptr_t>(o.sin) % 8 != 0)) {
    return false;
  }
  return total_tiles(o, 1) <= 65535;  // grid.x
}

}  // namespace

Status proj_path_chosen(const ProjGemmOperands& o, bool fused_by_default, ProjPath* path) {
  *path = ProjPath::kCublas;
  // GK_PROJ_PATH pins the path (tests run every shape through each; benchmarks compare).
  enum { kFused = 0, kCublas = 1, kSplitOnly = 2 };  // the choices' indices
  static const int forced = detail::env_choice("GK_PROJ_PATH", {"fused", "cublas", "split"});
  if (forced == detail::kEnvInvalid) return detail::env_error(kOp, "GK_PROJ_PATH", "fused|cublas|split");
  const bool split_ok = split_supported(o);
  if (forced == kCublas) return Status::Ok();
  if (forced == kSplitOnly) {
    if (split_ok) *path = ProjPath::kSplit;
    return Status::Ok();
  }
  if (forced != kFused && !fused_by_default) return Status::Ok();
  int sms = 0;
  GK_RETURN_IF_ERROR(detail::sm_count(kOp, &sms));
  if (split_ok && o.m <= kSingleTileRows && total_tiles(o, 1) <= sms) *path = ProjPath::kSplit;
  return Status::Ok();
}

Status launch_proj_gemm(const ProjGemmOperands& o, ProjPath path, cudaStream_t stream) {
  if (path == ProjPath::kSplit && split_supported(o)) {
    return heads_per_tile(o) == 1 ? launch_heads<1>(o, stream) : launch_heads<2>(o, stream);
  }
  return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: projection operands outside the chosen fused kernel's support",
                       kOp);
}

}  // namespace gk::gemma3
