// Host-side entry points of the projection kernels: the norm/RoPE pass (norm_rope.cu) and the split-K projection
// GEMM (splitk_proj_gemm_launch.cu).
#pragma once

#include <cuda_runtime_api.h>

#include "common/device_props.hpp"
#include "common/kernel_launch.hpp"
#include "gk/gk.hpp"
#include "projection/params.hpp"

namespace gk::gemma3 {

// `programmatic`: launched behind the k|v GEMM in `stream`; every block of the pass waits for it on the device
// before anything else (so the attention behind the pass, which waits for the pass, also sees k and v), then lets
// its dependents launch (AttentionLaunches::issue's `programmatic`).
Status launch_norm_rope(const NormRopeParams& p, int head_dim, bool programmatic, cudaStream_t stream);
// Operands of the split-K projection GEMM (see ProjGemmParams): A [m, k] row-major, each weight [heads * 128, k]
// row-major, outputs as column ranges of buffers with one row stride; head_dim is 128.
struct ProjGemmOperands {
  int64_t m = 0, k = 0;
  const __nv_bfloat16* a = nullptr;
  int segments = 0;
  const __nv_bfloat16* w[ProjGemmParams::kMaxSegments] = {};
  int64_t heads[ProjGemmParams::kMaxSegments] = {};
  __nv_bfloat16* out[ProjGemmParams::kMaxSegments] = {};
  const __nv_bfloat16* norm_weight[ProjGemmParams::kMaxSegments] = {};  // null: stored as computed
  int64_t out_row_stride = 0;
  const __nv_bfloat16* cos = nullptr;  // [m, 128], for the normed segments' RoPE
  const __nv_bfloat16* sin = nullptr;
  float eps = 0.f;
  float weight_offset = 0.f;
  // Memory for the next kernels (the O projection's weights) that the split kernel asks L2 to fetch once its
  // cluster's mainloop is done (without a K split: once its TMA warp has issued its last load), as
  // AttentionParams::l2_prefetch; 0 bytes: none. Ignored by the other paths.
  const void* l2_prefetch = nullptr;
  uint64_t l2_prefetch_bytes = 0;
};

struct SplitkProjPlan;  // splitk_proj_plan.hpp
struct SkinnyProjOperands;  // skinny_proj_plan.hpp
struct SkinnyProjPlan;
// The split-K kernels' shared-memory opt-ins and cluster residency, by cluster size, into the device description
// (at handle creation).
Status prepare_splitk_proj_kernels(detail::DeviceInfo* dev);
// The split-K projection GEMM's launch on operands splitk_proj_supported() accepts, tiled as `plan` says.
Status prepare_splitk_proj(const ProjGemmOperands& o, const SplitkProjPlan& plan, detail::KernelLaunch* out);
// The few-row projection's residency (CTAs per SM, clusters by size) into the device description.
Status prepare_skinny_proj_kernels(detail::DeviceInfo* dev);
// Its launch on operands skinny_proj_supported() accepts, split as `plan` says.
Status prepare_skinny_proj(const SkinnyProjOperands& o, const SkinnyProjPlan& plan, detail::KernelLaunch* out);

}  // namespace gk::gemma3
