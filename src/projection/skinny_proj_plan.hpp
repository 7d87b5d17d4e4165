// What the few-row projection (skinny_proj_gemm.cuh) can take and how it splits a call's K: plain C++ for the layer's
// planner and the host tests. The launcher (skinny_proj_launch.cu) executes the plan.
#pragma once

#include <cstdint>

#include "common/device_props.hpp"
#include "projection/params.hpp"

namespace gk::gemma3 {

inline constexpr int kSkinnyProjMaxRows = 16;  // one m16 tile
inline constexpr int kSkinnyProjChunk = 32;    // K granularity
inline constexpr int kSkinnyProjMinChunks = 4;  // per CTA of a split: at least one set of loads per lane

// A call's operands in the kernel's terms: A [m, k] (rows a_row_stride apart), each weight [units * unit, k]
// row-major, outputs as column ranges of buffers with one row stride.
struct SkinnyProjOperands {
  int64_t m = 0, k = 0, a_row_stride = 0;
  int unit = 128;  // output columns per CTA: the head dim for normed segments, 128 or 256
  const __nv_bfloat16* a = nullptr;
  int segments = 0;
  const __nv_bfloat16* w[SkinnyProjParams::kMaxSegments] = {};
  int64_t units[SkinnyProjParams::kMaxSegments] = {};
  const __nv_bfloat16* norm_weight[SkinnyProjParams::kMaxSegments] = {};  // null: stored as computed
  // Destinations as SkinnyProjParams says: packed rows, or per head [B, units, capacity, unit] (B = m / seq_len).
  __nv_bfloat16* out[SkinnyProjParams::kMaxSegments] = {};
  int64_t out_row_stride = 0;
  bool head_major[SkinnyProjParams::kMaxSegments] = {};
  bool at_lens[SkinnyProjParams::kMaxSegments] = {};
  int64_t capacity[SkinnyProjParams::kMaxSegments] = {};
  int64_t seq_len = 1;
  const int* lens = nullptr;
  const __nv_bfloat16* cos = nullptr;  // [m, unit], for the normed segments' RoPE
  const __nv_bfloat16* sin = nullptr;
  float eps = 0.f;
  float weight_offset = 0.f;
};

inline int64_t skinny_proj_tiles(const SkinnyProjOperands& o) {
  int64_t n = 0;
  for (int s = 0; s < o.segments; ++s) n += o.units[s];
  return n;
}

// Operands the kernel can take: few rows, K in whole chunks, 16-byte aligned rows of A and W (the lanes' loads),
// outputs aligned for a lane's store, norm weights and RoPE tables for its 4-byte reads.
inline bool skinny_proj_supported(const SkinnyProjOperands& o) {
  const auto aligned = [](const void* p, uintptr_t n) { return p != nullptr && reinterpret_cast<uintptr_t>(p) % n == 0; };
  if (o.unit != 128 && o.unit != 256) return false;
  if (o.segments < 1 || o.segments > SkinnyProjParams::kMaxSegments) return false;
  if (o.m < 1 || o.m > kSkinnyProjMaxRows || o.k < kSkinnyProjChunk || o.k % kSkinnyProjChunk != 0 ||
      o.k / kSkinnyProjChunk > INT32_MAX || o.a_row_stride < o.k || o.a_row_stride % 8 != 0) {
    return false;
  }
  const uintptr_t store = o.unit / 32 * 2;  // a lane's bytes of a row
  if (!aligned(o.a, 16) || o.seq_len < 1 || o.m % o.seq_len != 0) return false;
  bool normed = false, packed = false;
  for (int s = 0; s < o.segments; ++s) {
    if (o.units[s] < 1 || !aligned(o.w[s], 16) || !aligned(o.out[s], store)) return false;
    if (o.head_major[s] && (o.capacity[s] < o.seq_len || o.capacity[s] > INT32_MAX || (o.at_lens[s] && o.lens == nullptr))) {
      return false;
    }
    packed = packed || !o.head_major[s];
    if (o.norm_weight[s] != nullptr && !aligned(o.norm_weight[s], 4)) return false;
    normed = normed || o.norm_weight[s] != nullptr;
  }
  if (packed && (o.out_row_stride < 1 || o.out_row_stride * 2 % store != 0)) return false;
  if (normed && (!aligned(o.cos, 4) || !aligned(o.sin, 4))) return false;
  return skinny_proj_tiles(o) <= 65535;  // grid.x
}

struct SkinnyProjPlan {
  int split = 1;  // CTAs per cluster along K (1: no split)
};

// The largest K split whose grid is resident at once (`slots`: CTAs per SM times SMs; `resident[s]`: clusters of s
// CTAs that fit together) and leaves every CTA a few chunks: the weight stream then spreads over every SM.
inline SkinnyProjPlan plan_skinny_proj(const SkinnyProjOperands& o, int64_t slots,
                                       const int (&resident)[detail::kMaxClusterSplit + 1]) {
  SkinnyProjPlan p;
  const int64_t tiles = skinny_proj_tiles(o), chunks = o.k / kSkinnyProjChunk;
  for (int s = detail::kMaxClusterSplit; s >= 2; --s) {
    if (tiles * s <= slots && tiles <= resident[s] && chunks / s >= kSkinnyProjMinChunks) {
      p.split = s;
      break;
    }
  }
  return p;
}

}  // namespace gk::gemma3
