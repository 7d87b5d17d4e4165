// Launch of the split-K projection GEMM (splitk_proj_gemm_sm90.cuh) as the layer's plan says (splitk_proj_plan.hpp):
// tensor maps, the parameter block and the grid (tiles x row tiles x the K split, a cluster along z).
#include <cuda_runtime.h>

#include "common/cuda_check.hpp"
#include "common/device_props.hpp"
#include "common/kernel_launch.hpp"
#include "common/tensor_map.hpp"
#include "projection/splitk_proj_plan.hpp"
#include "projection/splitk_proj_gemm_sm90.cuh"

namespace gk::gemma3 {

namespace {

constexpr const char* kOp = "gemma3_attention";
static_assert(ProjGemmTraits<1>::kBM == kSplitkProjBM && ProjGemmTraits<1>::kBK == kSplitkProjBK,
              "the planner's tile (splitk_proj_plan.hpp) is the kernel's");

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

// The layer's first kernel: launched plainly (mask_tiles.cu relies on it).
template <int kHeads, bool kSplit>
detail::KernelLaunch make_launch(const ProjGemmParams& p, const Maps& maps, dim3 grid) {
  using Tr = ProjGemmTraits<kHeads>;
  return detail::KernelLaunch("projection gemm launch", proj_gemm_kernel<kHeads, kSplit>,
                              {grid, Tr::kThreads, Tr::kSmemBytes, /*cluster_z=*/kSplit}, maps.a, maps.w[0], maps.w[1],
                              maps.w[2], p);
}

template <int kHeads>
Status prepare_heads(const ProjGemmOperands& o, int split, detail::KernelLaunch* out) {
  using Tr = ProjGemmTraits<kHeads>;
  Maps maps;
  GK_RETURN_IF_ERROR(encode_maps<kHeads>(o, &maps));
  ProjGemmParams p{};
  p.m = static_cast<int>(o.m);
  int end = 0;
  for (int s = 0; s < ProjGemmParams::kMaxSegments; ++s) {
    if (s < o.segments) end += static_cast<int>((o.heads[s] + kHeads - 1) / kHeads);
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
  const int64_t n_tiles = end;  // every segment's tiles
  p.k_blocks = static_cast<int>(o.k / Tr::kBK);
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(m_tiles), static_cast<unsigned>(split));
  *out = split > 1 ? make_launch<kHeads, true>(p, maps, grid) : make_launch<kHeads, false>(p, maps, grid);
  return Status::Ok();
}

}  // namespace

Status prepare_splitk_proj_kernels(detail::DeviceInfo* dev) {
  const auto query = [&](const void* kernel, int threads, size_t smem, int* by_size) -> Status {
    for (int s = 2; s <= detail::kMaxClusterSplit; ++s) {
      GK_RETURN_IF_ERROR(detail::max_active_clusters(kOp, kernel, threads, smem, s, &by_size[s]));
    }
    return Status::Ok();
  };
  // The kernels without a K split (the ones with one get theirs from the residency query).
  GK_RETURN_IF_ERROR(detail::set_smem_opt_in(kOp, reinterpret_cast<const void*>(proj_gemm_kernel<1, false>),
                                             ProjGemmTraits<1>::kSmemBytes));
  GK_RETURN_IF_ERROR(detail::set_smem_opt_in(kOp, reinterpret_cast<const void*>(proj_gemm_kernel<2, false>),
                                             ProjGemmTraits<2>::kSmemBytes));
  GK_RETURN_IF_ERROR(query(reinterpret_cast<const void*>(proj_gemm_kernel<1, true>), ProjGemmTraits<1>::kThreads,
                           ProjGemmTraits<1>::kSmemBytes, dev->proj_splitk_clusters[0]));
  return query(reinterpret_cast<const void*>(proj_gemm_kernel<2, true>), ProjGemmTraits<2>::kThreads,
               ProjGemmTraits<2>::kSmemBytes, dev->proj_splitk_clusters[1]);
}

Status prepare_splitk_proj(const ProjGemmOperands& o, const SplitkProjPlan& plan, detail::KernelLaunch* out) {
  if (!splitk_proj_supported(o) || plan.split < 1 || plan.split > detail::kMaxClusterSplit) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: projection operands or plan outside the split-K kernel's support",
                         kOp);
  }
  return plan.heads_per_tile == 1 ? prepare_heads<1>(o, plan.split, out) : prepare_heads<2>(o, plan.split, out);
}

}  // namespace gk::gemma3
