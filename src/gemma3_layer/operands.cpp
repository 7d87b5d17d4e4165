// The Gemma3 layer's workspace carve and the operand blocks of its steps (operands.hpp): plain arithmetic on the
// call's config and tensors, shared by the planner and the orchestration (layer.cpp). Host code.
#include "gemma3_layer/operands.hpp"

#include <cmath>

#include "attention/decode_plan.hpp"
#include "common/gemm.hpp"
#include "common/workspace.hpp"

namespace gk::gemma3 {

using bf16 = __nv_bfloat16;

LayerBuffers carve_layer(const Gemma3AttentionConfig& c, void* base, LayerSteps steps) {
  detail::WorkspaceCarver w(base);
  const int64_t rows = c.batch * c.seq_len;
  LayerBuffers l;
  if (steps != LayerSteps::kAttend) l.qkv = w.take<bf16>(rows * (c.num_q_heads + 2 * c.num_kv_heads) * c.head_dim);
  if (steps != LayerSteps::kQkv) l.attn = w.take<bf16>(rows * c.num_q_heads * c.head_dim);
  l.gemm_workspace = w.take_bytes(detail::kGemmWorkspaceBytes);
  // A call with a cache and few new tokens runs the decode kernel: room for the most splits it may take.
  if (steps != LayerSteps::kQkv && decode_applies(c.seq_len)) {
    const int splits = decode_max_splits(c.batch, c.num_kv_heads, c.seq_len, c.num_q_heads / c.num_kv_heads);
    l.decode_partial = static_cast<float*>(
        w.take_bytes(decode_scratch_bytes(splits, c.batch, c.num_q_heads, c.seq_len, c.head_dim)));
  }
  if (c.mask_mode == GK_MASK_ADDITIVE && steps == LayerSteps::kAll) {
    l.mask_tile_bytes = mask_tile_scratch_bytes(c.batch, c.seq_len);
    l.mask_tiles = w.take_bytes(l.mask_tile_bytes);
  }
  l.bytes = w.bytes();
  return l;
}

namespace {

struct PackedColumns {
  bf16 *q, *k, *v;
};
PackedColumns packed_columns(const Gemma3AttentionConfig& c, const LayerBuffers& ws, bool v_first) {
  const int64_t D = c.head_dim, Hq = c.num_q_heads, Hkv = c.num_kv_heads;
  return {ws.qkv, ws.qkv + (v_first ? Hq + Hkv : Hq) * D, ws.qkv + (v_first ? Hq : Hq + Hkv) * D};
}

MaskMode to_mask_mode(gk_mask_mode m) {
  switch (m) {
    case GK_MASK_ADDITIVE:
      return MaskMode::kAdditive;
    case GK_MASK_NONE:
      return MaskMode::kNone;
    default:
      return MaskMode::kCausal;
  }
}

}  // namespace

ProjGemmOperands qkv_operands(const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t, const LayerBuffers& ws,
                              bool v_first) {
  const PackedColumns cols = packed_columns(c, ws, v_first);
  ProjGemmOperands o;
  o.m = c.batch * c.seq_len;
  o.k = c.hidden;
  o.a = static_cast<const bf16*>(t.hidden_states.data);
  o.segments = 3;
  const gk_tensor* w[3] = {&t.q_proj_weight, &t.k_proj_weight, &t.v_proj_weight};
  const int64_t heads[3] = {c.num_q_heads, c.num_kv_heads, c.num_kv_heads};
  bf16* out[3] = {cols.q, cols.k, cols.v};
  for (int s = 0; s < 3; ++s) {
    o.w[s] = static_cast<const bf16*>(w[s]->data);
    o.heads[s] = heads[s];
    o.out[s] = out[s];
  }
  o.norm_weight[0] = static_cast<const bf16*>(t.q_norm_weight.data);
  o.norm_weight[1] = static_cast<const bf16*>(t.k_norm_weight.data);
  o.out_row_stride = (c.num_q_heads + 2 * c.num_kv_heads) * c.head_dim;
  o.cos = static_cast<const bf16*>(t.cos.data);
  o.sin = static_cast<const bf16*>(t.sin.data);
  o.eps = c.rms_norm_eps;
  o.weight_offset = c.norm_weight_offset;
  return o;
}

SkinnyProjOperands skinny_operands(const ProjGemmOperands& o, int head_dim, int64_t seq_len) {
  SkinnyProjOperands s;
  s.seq_len = seq_len;
  s.m = o.m;
  s.k = o.k;
  s.a_row_stride = o.k;  // the hidden states are contiguous rows
  s.unit = head_dim;
  s.a = o.a;
  s.segments = o.segments;
  for (int i = 0; i < o.segments; ++i) {
    s.w[i] = o.w[i];
    s.units[i] = o.heads[i];
    s.out[i] = o.out[i];
    s.norm_weight[i] = o.norm_weight[i];
  }
  s.out_row_stride = o.out_row_stride;
  s.cos = o.cos;
  s.sin = o.sin;
  s.eps = o.eps;
  s.weight_offset = o.weight_offset;
  return s;
}

SkinnyProjOperands o_proj_operands(const Gemma3AttentionConfig& c, const LayerBuffers& ws, const void* o_proj_weight,
                                   void* out) {
  constexpr int kUnit = 128;
  const int64_t width = c.num_q_heads * c.head_dim;
  SkinnyProjOperands s;
  s.m = c.batch * c.seq_len;
  s.k = width;
  s.a_row_stride = width;
  s.unit = kUnit;
  s.a = ws.attn;
  s.segments = 1;
  s.w[0] = static_cast<const bf16*>(o_proj_weight);
  s.units[0] = c.hidden % kUnit == 0 ? c.hidden / kUnit : 0;  // 0: not the kernel's (skinny_proj_supported)
  s.out[0] = static_cast<bf16*>(out);
  s.out_row_stride = c.hidden;
  return s;
}

AttentionParams attention_params(const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t,
                                 const LayerBuffers& ws, bool v_first) {
  const int64_t D = c.head_dim, Hq = c.num_q_heads, width = (Hq + 2 * c.num_kv_heads) * D;
  const PackedColumns cols = packed_columns(c, ws, v_first);
  AttentionParams ap{};
  ap.q = cols.q;
  ap.k = cols.k;
  ap.v = cols.v;
  ap.o = ws.attn;
  ap.mask = c.mask_mode == GK_MASK_ADDITIVE ? static_cast<const bf16*>(t.attention_mask.data) : nullptr;
  ap.q_token_stride = ap.k_token_stride = ap.v_token_stride = width;
  ap.q_head_stride = ap.k_head_stride = ap.v_head_stride = ap.o_head_stride = D;
  ap.q_batch_stride = ap.k_batch_stride = ap.v_batch_stride = c.seq_len * width;
  ap.o_token_stride = Hq * D;
  ap.o_batch_stride = c.seq_len * Hq * D;
  ap.mask_row_stride = c.seq_len;
  ap.mask_batch_stride = c.seq_len * c.seq_len;
  ap.batch = static_cast<int>(c.batch);
  ap.seq_len = static_cast<int>(c.seq_len);
  ap.num_q_heads = static_cast<int>(Hq);
  ap.group_size = static_cast<int>(Hq / c.num_kv_heads);
  const float scale = c.query_scale > 0.f ? c.query_scale : static_cast<float>(1.0 / std::sqrt(double(D)));
  ap.softcap = c.softcap > 0.f;
  ap.scale_log2 = scale * kLog2e;
  ap.softcap_in = ap.softcap ? static_cast<float>(double(scale) / c.softcap) : 0.f;
  ap.softcap_out = ap.softcap ? c.softcap * kLog2e : 0.f;
  ap.mask_mode = to_mask_mode(c.mask_mode);
  // A window that covers the sequence is the causal mask.
  if (ap.mask_mode == MaskMode::kCausal && c.sliding_window > 0 && c.sliding_window < c.seq_len) {
    ap.mask_mode = MaskMode::kSliding;
    ap.window = static_cast<int>(c.sliding_window);
  }
  ap.mask_scratch = ws.mask_tiles;
  ap.mask_scratch_bytes = ws.mask_tile_bytes;
  return ap;
}

}  // namespace gk::gemma3
