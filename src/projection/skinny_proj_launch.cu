// Launch of the few-row projection (skinny_proj_gemm.cuh) as a plan says (skinny_proj_plan.hpp): the parameter block
// and the grid (units x the K split, a cluster along z).
#include <cuda_runtime.h>

#include "common/device_props.hpp"
#include "common/kernel_launch.hpp"
#include "common/status_util.hpp"
#include "projection/projection.hpp"
#include "projection/skinny_proj_gemm.cuh"
#include "projection/skinny_proj_plan.hpp"

namespace gk::gemma3 {

namespace {

constexpr const char* kOp = "gemma3_attention";
static_assert(SkinnyProjTraits<128>::kRows == kSkinnyProjMaxRows && SkinnyProjTraits<128>::kChunk == kSkinnyProjChunk,
              "the planner's limits (skinny_proj_plan.hpp) are the kernel's");

template <int kUnit>
Status query(detail::DeviceInfo* dev, int index) {
  using Tr = SkinnyProjTraits<kUnit>;
  const auto* plain = reinterpret_cast<const void*>(skinny_proj_kernel<kUnit, false>);
  const auto* split = reinterpret_cast<const void*>(skinny_proj_kernel<kUnit, true>);
  GK_RETURN_IF_ERROR(detail::set_smem_opt_in(kOp, plain, Tr::kSmemBytes));
  GK_RETURN_IF_ERROR(detail::set_smem_opt_in(kOp, split, Tr::kSmemBytes));
  GK_RETURN_IF_ERROR(
      detail::max_active_blocks(kOp, plain, Tr::kThreads, Tr::kSmemBytes, &dev->skinny_proj_blocks_per_sm[index]));
  for (int s = 2; s <= detail::kMaxClusterSplit; ++s) {
    GK_RETURN_IF_ERROR(detail::max_active_clusters(kOp, split, Tr::kThreads, Tr::kSmemBytes, s,
                                                   &dev->skinny_proj_clusters[index][s]));
  }
  return Status::Ok();
}

template <int kUnit>
detail::KernelLaunch make_launch(const SkinnyProjParams& p, dim3 grid) {
  using Tr = SkinnyProjTraits<kUnit>;
  const bool split = grid.z > 1;
  return split ? detail::KernelLaunch("few-row projection launch", skinny_proj_kernel<kUnit, true>,
                                      {grid, Tr::kThreads, Tr::kSmemBytes, /*cluster_z=*/true}, p)
               : detail::KernelLaunch("few-row projection launch", skinny_proj_kernel<kUnit, false>,
                                      {grid, Tr::kThreads, Tr::kSmemBytes, /*cluster_z=*/false}, p);
}

}  // namespace

Status prepare_skinny_proj_kernels(detail::DeviceInfo* dev) {
  GK_RETURN_IF_ERROR(query<128>(dev, 0));
  return query<256>(dev, 1);
}

Status prepare_skinny_proj(const SkinnyProjOperands& o, const SkinnyProjPlan& plan, detail::KernelLaunch* out) {
  if (!skinny_proj_supported(o) || plan.split < 1 || plan.split > detail::kMaxClusterSplit) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: projection operands or plan outside the few-row kernel's support",
                         kOp);
  }
  SkinnyProjParams p{};
  p.a = o.a;
  p.a_row_stride = o.a_row_stride;
  p.m = static_cast<int>(o.m);
  p.k_chunks = static_cast<int>(o.k / kSkinnyProjChunk);
  int end = 0;
  for (int s = 0; s < SkinnyProjParams::kMaxSegments; ++s) {
    const bool used = s < o.segments;
    if (used) end += static_cast<int>(o.units[s]);
    p.seg_end[s] = end;
    p.w[s] = used ? o.w[s] : nullptr;
    p.out[s] = used ? o.out[s] : nullptr;
    p.norm_weight[s] = used ? o.norm_weight[s] : nullptr;
    p.head_major[s] = used && o.head_major[s];
    p.at_lens[s] = used && o.at_lens[s];
    p.capacity[s] = used && o.head_major[s] ? static_cast<int>(o.capacity[s]) : 0;
  }
  p.out_row_stride = o.out_row_stride;
  p.seq_len = static_cast<int>(o.seq_len);
  p.lens = o.lens;
  p.cos = o.cos;
  p.sin = o.sin;
  p.eps = o.eps;
  p.weight_offset = o.weight_offset;
  const dim3 grid(static_cast<unsigned>(end), 1, static_cast<unsigned>(plan.split));
  *out = o.unit == 128 ? make_launch<128>(p, grid) : make_launch<256>(p, grid);
  return Status::Ok();
}

}  // namespace gk::gemma3
