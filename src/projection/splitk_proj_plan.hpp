// What the split-K projection GEMM (splitk_proj_gemm_sm90.cuh) can take and how it tiles a call: plain C++ for the
// layer's planner and the host tests. The launcher (splitk_proj_gemm_launch.cu) executes the plan.
#pragma once

#include <cstdint>

#include "common/device_props.hpp"
#include "common/splitk_choice.hpp"
#include "projection/projection.hpp"

namespace gk::gemma3 {

// The kernel's tile: 128 rows x one or two heads, K-blocks of 64 bf16 (one 128-byte swizzle row).
inline constexpr int kSplitkProjBM = 128;
inline constexpr int kSplitkProjBK = 64;
inline constexpr int kSplitkProjHeadDim = 128;  // the one head dim instantiated
inline constexpr int64_t kSplitkProjMaxRowTiles = 65535;  // grid.y

struct SplitkProjPlan {
  int heads_per_tile = 1;  // one for a single row tile (the weight stream bounds it), else two
  int split = 1;           // CTAs per cluster along K (1: no split)
};

inline int64_t splitk_proj_tiles(const ProjGemmOperands& o, int heads_per_tile) {
  int64_t n = 0;
  for (int s = 0; s < o.segments; ++s) n += (o.heads[s] + heads_per_tile - 1) / heads_per_tile;
  return n;
}

// Operands the kernel can take: sizes within its grid and tiling, TMA-readable inputs, 8-byte aligned outputs,
// norm weights and RoPE tables.
inline bool splitk_proj_supported(const ProjGemmOperands& o) {
  const auto aligned = [](const void* p, uintptr_t n) { return p != nullptr && reinterpret_cast<uintptr_t>(p) % n == 0; };
  if (o.segments < 1 || o.segments > ProjGemmParams::kMaxSegments) return false;
  if (o.m < 1 || o.m > kSplitkProjMaxRowTiles * kSplitkProjBM || o.k < 2 * kSplitkProjBK || o.k % kSplitkProjBK != 0 ||
      o.k > INT32_MAX) {
    return false;
  }
  if (!aligned(o.a, 16) || o.out_row_stride % 4 != 0 || o.out_row_stride > INT32_MAX) return false;
  bool normed = false;
  for (int s = 0; s < o.segments; ++s) {
    if (o.heads[s] < 1 || !aligned(o.w[s], 16) || !aligned(o.out[s], 8)) return false;
    if (o.norm_weight[s] != nullptr && !aligned(o.norm_weight[s], 8)) return false;
    normed = normed || o.norm_weight[s] != nullptr;
  }
  if (normed && (!aligned(o.cos, 8) || !aligned(o.sin, 8))) return false;
  return splitk_proj_tiles(o, 1) <= 65535;  // grid.x
}

inline SplitkProjPlan plan_splitk_proj(const ProjGemmOperands& o, const detail::DeviceInfo& dev) {
  SplitkProjPlan p;
  p.heads_per_tile = o.m <= kSplitkProjBM ? 1 : 2;
  const int64_t tiles = (o.m + kSplitkProjBM - 1) / kSplitkProjBM * splitk_proj_tiles(o, p.heads_per_tile);
  // Any cluster size up to the portable 8: the kernel shares the K-blocks out unevenly where they do not divide.
  p.split = detail::choose_splitk(dev.sms, dev.proj_splitk_clusters[p.heads_per_tile - 1], tiles,
                                  static_cast<int>(o.k / kSplitkProjBK), {8, 7, 6, 5, 4, 3, 2}, /*even_k=*/false);
  return p;
}

}  // namespace gk::gemma3
