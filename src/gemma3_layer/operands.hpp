// The Gemma3 layer's workspace layout and the operand blocks of its steps, built from the call's tensors. Shared by
// the planner (plan.cpp), which looks at their shapes and alignment, and the orchestration (layer.cpp), which runs
// them. Host code.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "attention/attention.hpp"
#include "gk/gk.hpp"
#include "projection/projection.hpp"
#include "projection/skinny_proj_plan.hpp"

namespace gk::gemma3 {

struct LayerBuffers {
  __nv_bfloat16* qkv = nullptr;   // [M, (Hq + 2 Hkv) D]: q's heads, then k's and v's (or v's before k's: v_first)
  __nv_bfloat16* attn = nullptr;  // [M, Hq D]
  void* gemm_workspace = nullptr;
  void* mask_tiles = nullptr;  // additive mode: the attention's per-call tile lists
  size_t mask_tile_bytes = 0;
  float* decode_partial = nullptr;  // a decode-sized call (decode_plan.hpp): the splits' partial outputs
  size_t bytes = 0;
};

// Which steps a workspace serves: the whole layer, or one of its two halves as separate calls (split_ops.cpp).
enum class LayerSteps { kAll, kQkv, kAttend };

// The workspace carved for `c` from `base` (null: sizes only). kQkv has no attn, kAttend no qkv buffer.
LayerBuffers carve_layer(const Gemma3AttentionConfig& c, void* base, LayerSteps steps = LayerSteps::kAll);

// The q|k|v projection into the packed rows, q and k normed and rotated; v's heads before k's with `v_first`.
ProjGemmOperands qkv_operands(const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t, const LayerBuffers& ws,
                              bool v_first);
// The same step in the few-row kernel's terms (units of one head), into the packed rows.
SkinnyProjOperands skinny_operands(const ProjGemmOperands& o, int head_dim, int64_t seq_len);
// The O projection, out = attn W_o^T, in the few-row kernel's terms (units of 128 output columns).
SkinnyProjOperands o_proj_operands(const Gemma3AttentionConfig& c, const LayerBuffers& ws, const void* o_proj_weight,
                                   void* out);
// The attention over the packed rows into ws.attn (no L2 prefetch; the plan adds it).
AttentionParams attention_params(const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t,
                                 const LayerBuffers& ws, bool v_first);

}  // namespace gk::gemma3
