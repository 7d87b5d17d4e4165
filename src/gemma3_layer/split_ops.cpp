// The layer in two calls (gk_gemma3_qkv, gk_gemma3_attend), for callers that keep the key/value cache themselves:
// the same steps as the fused layer (steps.hpp), each call with a workspace of its own.
#include "api/handle.hpp"
#include "common/status_util.hpp"
#include "gemma3_layer/steps.hpp"
#include "gemma3_layer/validate.hpp"

namespace gk {

namespace {

constexpr const char* kQkvOp = "gemma3_qkv";
constexpr const char* kAttendOp = "gemma3_attend";
using bf16 = __nv_bfloat16;

// The qkv call's tensors as the layer's (the steps read them from there); the attention's are not used.
Gemma3AttentionTensors layer_view(const Gemma3QkvTensors& t) {
  Gemma3AttentionTensors l{};
  l.hidden_states = t.hidden_states;
  l.cos = t.cos;
  l.sin = t.sin;
  l.q_proj_weight = t.q_proj_weight;
  l.k_proj_weight = t.k_proj_weight;
  l.v_proj_weight = t.v_proj_weight;
  l.q_norm_weight = t.q_norm_weight;
  l.k_norm_weight = t.k_norm_weight;
  return l;
}

}  // namespace

Status gemma3_qkv_workspace_size(const Gemma3AttentionConfig& config, size_t* bytes) {
  if (bytes == nullptr) return detail::error(GK_STATUS_INVALID_ARGUMENT, "%s: bytes is null", kQkvOp);
  GK_RETURN_IF_ERROR(gemma3::check_config(config, kQkvOp));
  *bytes = gemma3::carve_layer(config, nullptr, gemma3::LayerSteps::kQkv).bytes;
  return Status::Ok();
}

Status gemma3_attend_workspace_size(const Gemma3AttentionConfig& config, size_t* bytes) {
  if (bytes == nullptr) return detail::error(GK_STATUS_INVALID_ARGUMENT, "%s: bytes is null", kAttendOp);
  GK_RETURN_IF_ERROR(gemma3::check_config(config, kAttendOp));
  *bytes = gemma3::carve_layer(config, nullptr, gemma3::LayerSteps::kAttend).bytes;
  return Status::Ok();
}

Status gemma3_qkv_forward(gk_handle_t handle, const Gemma3AttentionConfig& c, const Gemma3QkvTensors& t,
                          const KvCache* cache, void* workspace, size_t workspace_bytes, gk_stream_t stream_in) {
  GK_RETURN_IF_ERROR(gemma3_qkv_check(c, t, cache));
  GK_RETURN_IF_ERROR(detail::check_call(kQkvOp, handle, workspace, workspace_bytes,
                                        gemma3::carve_layer(c, nullptr, gemma3::LayerSteps::kQkv).bytes));
  GK_RETURN_IF_ERROR(gemma3::check_workspace_apart(kQkvOp, workspace, workspace_bytes, {{"q_out", &t.q_out}}));
  if (cache != nullptr) {
    GK_RETURN_IF_ERROR(gemma3::check_workspace_apart(kQkvOp, workspace, workspace_bytes, *cache));
  } else {
    GK_RETURN_IF_ERROR(gemma3::check_workspace_apart(kQkvOp, workspace, workspace_bytes,
                                                     {{"k_out", &t.k_out}, {"v_out", &t.v_out}}));
  }
  auto stream = reinterpret_cast<cudaStream_t>(stream_in);
  const Gemma3AttentionTensors lt = layer_view(t);
  const gemma3::LayerBuffers ws = gemma3::carve_layer(c, workspace, gemma3::LayerSteps::kQkv);
  gemma3::LayerPlan plan;
  gemma3::plan_qkv_step(c, lt, ws, handle->device_info, handle->overrides, &plan);

  gemma3::QkvStep step;
  GK_RETURN_IF_ERROR(gemma3::prepare_qkv_step(c, lt, ws, plan, nullptr, 0, &step));
  // k and v into the cache or into their outputs, q into its output: one scatter out of the packed rows.
  gemma3::HeadScatterParams sp;
  const int S = static_cast<int>(c.seq_len), Hkv = static_cast<int>(c.num_kv_heads);
  const auto column = [&](int i) { return static_cast<int>(step.operands.out[i] - ws.qkv); };
  if (cache != nullptr) {
    sp = gemma3::cache_scatter(c, step, ws, *cache);
  } else {
    sp.qkv = ws.qkv;
    sp.row_stride = step.operands.out_row_stride;
    sp.batch = static_cast<int>(c.batch);
    sp.seq_len = S;
    sp.head_dim = static_cast<int>(c.head_dim);
    sp.part[sp.parts++] = {column(1), Hkv, static_cast<bf16*>(t.k_out.data), S, false};
    sp.part[sp.parts++] = {column(2), Hkv, static_cast<bf16*>(t.v_out.data), S, false};
  }
  sp.part[sp.parts++] = {column(0), static_cast<int>(c.num_q_heads), static_cast<bf16*>(t.q_out.data), S, false};
  bool folded = false;  // the few-row kernel writes every head where it goes: no scatter
  GK_RETURN_IF_ERROR(gemma3::fold_head_scatter(c, ws, plan, sp, &step, &folded));
  detail::KernelLaunch scatter;
  if (!folded) GK_RETURN_IF_ERROR(gemma3::prepare_head_scatter(kQkvOp, sp, &scatter));

  bool programmatic = false;  // the scatter waits for the whole step (it does not launch early)
  GK_RETURN_IF_ERROR(gemma3::issue_qkv_step(handle, c, lt, ws, plan, step, stream, &programmatic));
  return folded ? Status::Ok() : scatter.issue(kQkvOp, stream);
}

Status gemma3_attend_forward(gk_handle_t handle, const Gemma3AttentionConfig& c, const Gemma3AttendTensors& t,
                             const KvCache& cache, void* workspace, size_t workspace_bytes, gk_stream_t stream_in) {
  GK_RETURN_IF_ERROR(gemma3_attend_check(c, t, cache));
  GK_RETURN_IF_ERROR(detail::check_call(kAttendOp, handle, workspace, workspace_bytes,
                                        gemma3::carve_layer(c, nullptr, gemma3::LayerSteps::kAttend).bytes));
  GK_RETURN_IF_ERROR(gemma3::check_workspace_apart(kAttendOp, workspace, workspace_bytes, cache));
  GK_RETURN_IF_ERROR(gemma3::check_workspace_apart(kAttendOp, workspace, workspace_bytes,
                                                   {{"query", &t.query}, {"out", &t.out}}));
  auto stream = reinterpret_cast<cudaStream_t>(stream_in);
  const gemma3::LayerBuffers ws = gemma3::carve_layer(c, workspace, gemma3::LayerSteps::kAttend);
  const int64_t D = c.head_dim, Hq = c.num_q_heads, S = c.seq_len;

  // The layer's attention with the queries from `query` ([B, Hq, S, D]) and keys and values from the cache.
  Gemma3AttentionTensors none{};
  gemma3::AttentionParams ap = gemma3::attention_params(c, none, ws, false);
  ap.q = static_cast<const bf16*>(t.query.data);
  ap.q_token_stride = D;
  ap.q_head_stride = S * D;
  ap.q_batch_stride = Hq * S * D;
  gemma3::use_cache(c, cache, &ap);
  ap.decode_partial = ws.decode_partial;
  if (gemma3::attend_prefetches_o(handle->overrides)) {
    ap.l2_prefetch = t.o_proj_weight.data;
    ap.l2_prefetch_bytes = uint64_t(c.hidden) * uint64_t(Hq * D) * sizeof(bf16) / 16 * 16;
  }
  gemma3::AttentionPlan plan;
  GK_RETURN_IF_ERROR(
      gemma3::plan_cached_attention(handle, ap, static_cast<int>(D), cache.max_cached + c.seq_len, &plan));
  gemma3::AttentionLaunches attention;
  GK_RETURN_IF_ERROR(gemma3::prepare_attention(ap, static_cast<int>(D), plan, &attention));
  gemma3::LayerPlan o_plan;
  gemma3::plan_o_projection(gemma3::o_proj_operands(c, ws, t.o_proj_weight.data, t.out.data), handle->device_info,
                            handle->overrides, &o_plan);
  GK_RETURN_IF_ERROR(attention.issue(kAttendOp, /*programmatic=*/false, stream));
  return gemma3::run_o_projection(handle, c, ws, o_plan, t.o_proj_weight.data, t.out.data, stream);
}

}  // namespace gk
