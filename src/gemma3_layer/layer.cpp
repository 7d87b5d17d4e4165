// One Gemma3 attention layer call, as its plan says (plan.cpp): the q|k|v projections into a packed buffer with the
// per-head norm and RoPE (the split-K kernel, or cuBLASLt GEMMs and the norm/RoPE pass), the attention reading
// q/k/v straight from the packed rows, and the O projection (cuBLASLt). The steps' operand blocks, with every scalar
// the kernels need, come from operands.cpp; here they are planned, prepared and issued.
#include "api/handle.hpp"
#include "attention/attention.hpp"
#include "common/gemm.hpp"
#include "common/status_util.hpp"
#include "common/tensor_check.hpp"
#include "common/workspace.hpp"
#include "attention/decode_plan.hpp"
#include "gemma3_layer/operands.hpp"
#include "gemma3_layer/plan.hpp"
#include "gemma3_layer/steps.hpp"
#include "gemma3_layer/validate.hpp"
#include "projection/projection.hpp"

namespace gk {

namespace {

constexpr const char* kOp = "gemma3_attention";
using bf16 = __nv_bfloat16;

// The q|k|v step on cuBLASLt: one GEMM over all of N where the weights lie back to back, else q, then k and v as one
// strided-batch GEMM or two GEMMs; then the norm/RoPE pass. A GEMM that cuBLASLt declines falls back to the next
// form (clearing the error its attempt left); the result says whether the pass ran programmatically behind the
// last GEMM on the main stream (else it ran on the side stream beside v's GEMM).
Status run_qkv_cublas(gk_handle_t handle, const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t,
                      const gemma3::LayerBuffers& ws, const gemma3::LayerPlan& plan, const gemma3::ProjGemmOperands& o,
                      cudaStream_t stream, bool* programmatic) {
  const int64_t rows = c.batch * c.seq_len, D = c.head_dim, Hkv = c.num_kv_heads;
  const int64_t width = o.out_row_stride;
  auto& gemm = handle->gemm;
  bf16* const q = o.out[0];
  bf16* const k = o.out[1];
  bf16* const v = o.out[2];
  // batch > 1: that many projections of `heads` heads each, weights weight_stride elements apart, outputs side by
  // side in the packed rows.
  const auto proj = [&](const char* what, const void* w, int64_t heads, bf16* dst, int64_t batch = 1,
                        int64_t weight_stride = 0) {
    detail::GemmShape shape{rows, heads * D, c.hidden, c.hidden, c.hidden, width, detail::GemmKind::kBf16};
    shape.batch = batch;
    shape.batch_stride_b = weight_stride;
    shape.batch_stride_c = batch > 1 ? heads * D : 0;
    return gemm.run(what, shape, t.hidden_states.data, w, dst, ws.gemm_workspace, detail::kGemmWorkspaceBytes, stream);
  };
  const auto fell_back = [] {
    (void)cudaGetLastError();
    return false;
  };
  bool qkv_one = plan.qkv_one_gemm;
  if (qkv_one) {
    qkv_one = proj("gemma3_attention: q|k|v projection", t.q_proj_weight.data, c.num_q_heads + 2 * Hkv, q).ok() ||
              fell_back();
  }
  if (!qkv_one) GK_RETURN_IF_ERROR(proj("gemma3_attention: q projection", t.q_proj_weight.data, c.num_q_heads, q));
  bool kv_batched = !qkv_one && plan.kv_batched;
  if (kv_batched) {
    const int64_t stride = plan.kv_batch_stride;
    const Status st = plan.v_first ? proj("gemma3_attention: v|k projection", t.v_proj_weight.data, Hkv, v, 2, stride)
                                   : proj("gemma3_attention: k|v projection", t.k_proj_weight.data, Hkv, k, 2, stride);
    kv_batched = st.ok() || fell_back();
  }
  if (!qkv_one && !kv_batched) GK_RETURN_IF_ERROR(proj("gemma3_attention: k projection", t.k_proj_weight.data, Hkv, k));

  gemma3::NormRopeParams nr{};
  nr.qkv = ws.qkv;
  nr.cos = o.cos;
  nr.sin = o.sin;
  nr.q_norm_weight = o.norm_weight[0];
  nr.k_norm_weight = o.norm_weight[1];
  nr.rows = rows;
  nr.row_stride = width;
  nr.num_q_heads = static_cast<int>(c.num_q_heads);
  nr.num_kv_heads = static_cast<int>(Hkv);
  nr.k_head0 = static_cast<int>((k - ws.qkv) / D);
  nr.eps = c.rms_norm_eps;
  nr.weight_offset = c.norm_weight_offset;
  // The pass (memory-bound, q and k columns only) goes programmatically behind the last GEMM, or on the side
  // stream beside v's GEMM (compute-bound), the attention waiting for both (docs/perf-log.md v9).
  *programmatic = qkv_one || kv_batched;
  if (*programmatic) return gemma3::launch_norm_rope(nr, static_cast<int>(D), /*programmatic=*/true, stream);
  detail::SideScope side(handle->side, kOp, stream);
  GK_RETURN_IF_ERROR(side.fork());
  GK_RETURN_IF_ERROR(gemma3::launch_norm_rope(nr, static_cast<int>(D), /*programmatic=*/false, side.stream()));
  GK_RETURN_IF_ERROR(proj("gemma3_attention: v projection", t.v_proj_weight.data, Hkv, v));
  return side.join();
}

}  // namespace

namespace gemma3 {

Status prepare_qkv_step(const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t, const LayerBuffers& ws,
                        const LayerPlan& plan, const void* l2_prefetch, uint64_t l2_prefetch_bytes, QkvStep* step) {
  step->operands = qkv_operands(c, t, ws, plan.v_first);
  if (plan.qkv == QkvKernel::kSkinny) {
    return prepare_skinny_proj(skinny_operands(step->operands, static_cast<int>(c.head_dim), c.seq_len), plan.skinny,
                               &step->launch);
  }
  if (plan.qkv != QkvKernel::kSplitk) return Status::Ok();
  if (l2_prefetch != nullptr) {
    step->operands.l2_prefetch = l2_prefetch;
    step->operands.l2_prefetch_bytes = l2_prefetch_bytes;
  }
  return prepare_splitk_proj(step->operands, plan.splitk, &step->launch);
}

Status fold_head_scatter(const Gemma3AttentionConfig& c, const LayerBuffers& ws, const LayerPlan& plan,
                         const HeadScatterParams& sp, QkvStep* step, bool* folded) {
  *folded = false;
  if (plan.qkv != QkvKernel::kSkinny) return Status::Ok();
  SkinnyProjOperands o = skinny_operands(step->operands, static_cast<int>(c.head_dim), c.seq_len);
  for (int i = 0; i < sp.parts; ++i) {
    const HeadScatterPart& part = sp.part[i];
    int seg = 0;
    while (seg < o.segments && o.out[seg] != ws.qkv + part.col) ++seg;
    if (seg == o.segments || o.units[seg] != part.heads) {
      return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: a head scatter that is not one of the step's segments", kOp);
    }
    o.out[seg] = part.dst;
    o.head_major[seg] = true;
    o.at_lens[seg] = part.at_lens;
    o.capacity[seg] = part.capacity;
  }
  o.lens = sp.lens;
  if (!skinny_proj_supported(o)) return Status::Ok();  // the packed rows and the scatter, as prepared
  GK_RETURN_IF_ERROR(prepare_skinny_proj(o, plan.skinny, &step->launch));
  *folded = true;
  return Status::Ok();
}

Status issue_qkv_step(gk_handle_t handle, const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t,
                      const LayerBuffers& ws, const LayerPlan& plan, QkvStep& step, cudaStream_t stream,
                      bool* programmatic) {
  if (plan.qkv != QkvKernel::kCublas) {
    *programmatic = true;  // both kernels let their dependent launch early
    return step.launch.issue(kOp, stream);
  }
  return run_qkv_cublas(handle, c, t, ws, plan, step.operands, stream, programmatic);
}

HeadScatterParams cache_scatter(const Gemma3AttentionConfig& c, const QkvStep& step, const LayerBuffers& ws,
                                const KvCache& cache) {
  const int max_len = static_cast<int>(cache.k_cache.shape[2]), Hkv = static_cast<int>(c.num_kv_heads);
  HeadScatterParams sp;
  sp.qkv = ws.qkv;
  sp.row_stride = step.operands.out_row_stride;
  sp.parts = 2;
  sp.part[0] = {static_cast<int>(step.operands.out[1] - ws.qkv), Hkv, static_cast<bf16*>(cache.k_cache.data), max_len,
                true};
  sp.part[1] = {static_cast<int>(step.operands.out[2] - ws.qkv), Hkv, static_cast<bf16*>(cache.v_cache.data), max_len,
                true};
  sp.lens = static_cast<const int*>(cache.cache_seqlens.data);
  sp.batch = static_cast<int>(c.batch);
  sp.seq_len = static_cast<int>(c.seq_len);
  sp.head_dim = static_cast<int>(c.head_dim);
  return sp;
}

void use_cache(const Gemma3AttentionConfig& c, const KvCache& cache, AttentionParams* ap) {
  const int64_t D = c.head_dim, Hkv = c.num_kv_heads, max_len = cache.k_cache.shape[2];
  ap->k = static_cast<const bf16*>(cache.k_cache.data);
  ap->v = static_cast<const bf16*>(cache.v_cache.data);
  ap->k_token_stride = ap->v_token_stride = D;
  ap->k_head_stride = ap->v_head_stride = max_len * D;
  ap->k_batch_stride = ap->v_batch_stride = Hkv * max_len * D;
  ap->kv_lens = static_cast<const int*>(cache.cache_seqlens.data);
  ap->kv_starts = static_cast<const int*>(cache.cache_starts.data);
  ap->kv_capacity = static_cast<int>(max_len);
  // The window applies across cached and new keys (attention_params judged it by the new tokens alone).
  if (c.mask_mode == GK_MASK_CAUSAL && c.sliding_window > 0 && c.sliding_window < cache.max_cached + c.seq_len) {
    ap->mask_mode = MaskMode::kSliding;
    ap->window = static_cast<int>(c.sliding_window);
  }
}

Status plan_cached_attention(gk_handle_t handle, const AttentionParams& ap, int head_dim, int64_t max_keys,
                             AttentionPlan* plan) {
  // Few new tokens: the decode kernel, unless the sm80 kernel is pinned (then its cached form, as for longer calls).
  const int64_t kv_heads = ap.num_q_heads / ap.group_size;
  if (decode_applies(ap.seq_len) && int64_t(ap.batch) * kv_heads <= 65535 && handle->overrides.attention_kernel != 1) {
    *plan = AttentionPlan{};
    plan->kernel = AttentionKernel::kDecode;
    plan->splits = decode_splits(ap.batch, kv_heads, ap.seq_len, ap.group_size, max_keys);
    return Status::Ok();
  }
  // Longer calls: the prefill kernels' cached forms, the sm90 kernel's where it takes the call (causal or a window,
  // q in the packed rows or head-major, left padding included) and the grid is wide enough, as without a cache.
  return plan_attention(attention_shape(ap, head_dim), handle->device_info, handle->overrides, plan);
}

Status check_workspace_apart(const char* op, void* workspace, size_t workspace_bytes,
                             std::initializer_list<std::pair<const char*, const gk_tensor*>> tensors) {
  const int64_t elems = static_cast<int64_t>(workspace_bytes / 2);  // as bf16 elements
  const gk_tensor view = gk_tensor_contiguous(workspace, GK_DTYPE_BF16, 1, &elems);
  return detail::check_no_overlap(op, "workspace", view, tensors);
}

Status check_workspace_apart(const char* op, void* workspace, size_t workspace_bytes, const KvCache& cache) {
  return check_workspace_apart(op, workspace, workspace_bytes,
                               {{"k_cache", &cache.k_cache}, {"v_cache", &cache.v_cache},
                                {"cache_seqlens", &cache.cache_seqlens}, {"cache_starts", &cache.cache_starts}});
}

Status prepare_o_skinny(const Gemma3AttentionConfig& c, const LayerBuffers& ws, const LayerPlan& plan,
                        const void* o_proj_weight, void* out, detail::KernelLaunch* launch) {
  if (launch == nullptr) return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: more launches than a list holds", kOp);
  GK_RETURN_IF_ERROR(prepare_skinny_proj(o_proj_operands(c, ws, o_proj_weight, out), plan.o_skinny, launch));
  // Behind the attention's last kernel, programmatically: its CTAs start streaming W_o while that kernel ends (the
  // weights depend on nothing before; it waits for the attention's output before reading it).
  launch->set_programmatic(true);
  return Status::Ok();
}

Status run_o_projection(gk_handle_t handle, const Gemma3AttentionConfig& c, const LayerBuffers& ws,
                        const LayerPlan& plan, const void* o_proj_weight, void* out, cudaStream_t stream) {
  if (plan.o_proj == OProjKernel::kSkinny) {
    detail::KernelLaunch launch;
    GK_RETURN_IF_ERROR(prepare_o_skinny(c, ws, plan, o_proj_weight, out, &launch));
    return launch.issue("gemma3_attention: o projection", stream);
  }
  const int64_t rows = c.batch * c.seq_len, width = c.num_q_heads * c.head_dim;
  const detail::GemmShape shape{rows, c.hidden, width, width, width, c.hidden, detail::GemmKind::kBf16};
  return handle->gemm.run("gemma3_attention: o projection", shape, ws.attn, o_proj_weight, out, ws.gemm_workspace,
                          detail::kGemmWorkspaceBytes, stream);
}

}  // namespace gemma3

Status gemma3_attention_workspace_size(const Gemma3AttentionConfig& config, size_t* bytes) {
  if (bytes == nullptr) return detail::error(GK_STATUS_INVALID_ARGUMENT, "%s: bytes is null", kOp);
  GK_RETURN_IF_ERROR(gemma3::check_config(config));
  *bytes = gemma3::carve_layer(config, nullptr).bytes;
  return Status::Ok();
}

namespace {

// With a cache, the attention's part is planned as forward plans it (plan_cached_attention), not as for a call
// without one.
Status plan_description(gk_handle_t handle, const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t,
                        const KvCache* cache, std::string* description) {
  GK_RETURN_IF_ERROR(detail::check_handle(kOp, handle));
  gemma3::LayerPlan plan;
  GK_RETURN_IF_ERROR(
      gemma3::plan_layer(c, t, handle->device_info, handle->overrides, &plan, false, cache != nullptr));
  if (cache != nullptr) {
    // Sizes and alignment only, as plan_layer carves it.
    const gemma3::LayerBuffers ws = gemma3::carve_layer(c, reinterpret_cast<void*>(detail::WorkspaceCarver::kAlign));
    gemma3::AttentionParams ap = gemma3::attention_params(c, t, ws, plan.v_first);
    gemma3::use_cache(c, *cache, &ap);
    GK_RETURN_IF_ERROR(gemma3::plan_cached_attention(handle, ap, static_cast<int>(c.head_dim),
                                                     cache->max_cached + c.seq_len, &plan.attention));
    gemma3::record_attention_choices(plan.attention, &plan.chosen);
  }
  *description = detail::format_overrides(plan.chosen);
  return Status::Ok();
}

}  // namespace

Status gemma3_attention_plan(gk_handle_t handle, const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t,
                             std::string* description) {
  GK_RETURN_IF_ERROR(gemma3_attention_check(c, t));
  return plan_description(handle, c, t, nullptr, description);
}

Status gemma3_attention_plan_cached(gk_handle_t handle, const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t,
                                    const KvCache& cache, std::string* description) {
  GK_RETURN_IF_ERROR(gemma3_attention_check_cached(c, t, cache));
  return plan_description(handle, c, t, &cache, description);
}

namespace {

// One call, with or without a key/value cache (checked by the caller). With one: the new tokens' k and v go into the
// cache after the q|k|v step, and the attention (a kernel's cached form) reads keys and values from there.
Status forward(gk_handle_t handle, const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t, const KvCache* cache,
               void* workspace, size_t workspace_bytes, gk_stream_t stream_in) {
  GK_RETURN_IF_ERROR(
      detail::check_call(kOp, handle, workspace, workspace_bytes, gemma3::carve_layer(c, nullptr).bytes));
  auto stream = reinterpret_cast<cudaStream_t>(stream_in);
  bool capturing = false;
  GK_RETURN_IF_ERROR(detail::stream_capturing(kOp, stream, &capturing));
  gemma3::LayerPlan plan;
  GK_RETURN_IF_ERROR(
      gemma3::plan_layer(c, t, handle->device_info, handle->overrides, &plan, capturing, cache != nullptr));
  const gemma3::LayerBuffers ws = gemma3::carve_layer(c, workspace);
  const int64_t D = c.head_dim;
  const uint64_t o_weight_bytes = uint64_t(c.hidden) * uint64_t(c.num_q_heads * D) * sizeof(bf16) / 16 * 16;

  // Every launch of the fused steps is made before the first is issued (kernel_launch.hpp). With a cache the
  // attention is not the projection's programmatic dependent: it asks for the O weights instead.
  const bool projection_prefetch = plan.o_prefetch == gemma3::OPrefetch::kProjection && cache == nullptr;
  gemma3::QkvStep qkv;
  GK_RETURN_IF_ERROR(gemma3::prepare_qkv_step(c, t, ws, plan, projection_prefetch ? t.o_proj_weight.data : nullptr,
                                              o_weight_bytes, &qkv));
  gemma3::AttentionParams ap = gemma3::attention_params(c, t, ws, plan.v_first);
  if (plan.o_prefetch == gemma3::OPrefetch::kAttention ||
      (cache != nullptr && plan.o_prefetch == gemma3::OPrefetch::kProjection)) {
    ap.l2_prefetch = t.o_proj_weight.data;
    ap.l2_prefetch_bytes = o_weight_bytes;
  }
  detail::KernelLaunch cache_write;
  bool cache_written = false;  // by the q|k|v step itself
  if (cache != nullptr) {
    GK_RETURN_IF_ERROR(gemma3::check_workspace_apart(kOp, workspace, workspace_bytes, *cache));
    const gemma3::HeadScatterParams sp = gemma3::cache_scatter(c, qkv, ws, *cache);
    GK_RETURN_IF_ERROR(gemma3::fold_head_scatter(c, ws, plan, sp, &qkv, &cache_written));
    if (!cache_written) GK_RETURN_IF_ERROR(gemma3::prepare_head_scatter(kOp, sp, &cache_write));
    gemma3::use_cache(c, *cache, &ap);
    ap.decode_partial = ws.decode_partial;
    GK_RETURN_IF_ERROR(gemma3::plan_cached_attention(handle, ap, static_cast<int>(D), cache->max_cached + c.seq_len,
                                                     &plan.attention));
  }
  gemma3::AttentionLaunches attention;
  GK_RETURN_IF_ERROR(gemma3::prepare_attention(ap, static_cast<int>(D), plan.attention, &attention));

  // The q|k|v step on the library's own kernel: it, the cache write, the attention's kernels and a few-row O
  // projection in stream order, as one graph launch where the plan says so (launch_graph.hpp).
  if (plan.qkv != gemma3::QkvKernel::kCublas) {
    detail::LaunchList launches;
    *launches.add() = qkv.launch;
    if (cache != nullptr && !cache_written) *launches.add() = cache_write;
    GK_RETURN_IF_ERROR(attention.append(/*programmatic=*/cache == nullptr || cache_written, &launches));
    const bool o_skinny = plan.o_proj == gemma3::OProjKernel::kSkinny;
    if (o_skinny) {
      GK_RETURN_IF_ERROR(gemma3::prepare_o_skinny(c, ws, plan, t.o_proj_weight.data, t.out.data, launches.add()));
    }
    // At most 7 of LaunchList's 8.
    GK_RETURN_IF_ERROR(detail::issue_launches(kOp, launches, plan.graph ? &handle->graphs : nullptr, stream));
    if (o_skinny) return Status::Ok();
    return gemma3::run_o_projection(handle, c, ws, plan, t.o_proj_weight.data, t.out.data, stream);
  }
  // cuBLASLt's q|k|v GEMMs (and the norm/RoPE pass), then the rest launch by launch.
  bool attention_programmatic = false;
  GK_RETURN_IF_ERROR(gemma3::issue_qkv_step(handle, c, t, ws, plan, qkv, stream, &attention_programmatic));
  if (cache != nullptr && !cache_written) {  // after the whole q|k|v step, and the attention after the whole write
    GK_RETURN_IF_ERROR(cache_write.issue(kOp, stream));
    attention_programmatic = false;
  }
  GK_RETURN_IF_ERROR(attention.issue(kOp, attention_programmatic, stream));
  return gemma3::run_o_projection(handle, c, ws, plan, t.o_proj_weight.data, t.out.data, stream);
}

}  // namespace

Status gemma3_attention_forward(gk_handle_t handle, const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t,
                                void* workspace, size_t workspace_bytes, gk_stream_t stream) {
  GK_RETURN_IF_ERROR(gemma3_attention_check(c, t));
  return forward(handle, c, t, nullptr, workspace, workspace_bytes, stream);
}

Status gemma3_attention_forward_cached(gk_handle_t handle, const Gemma3AttentionConfig& c,
                                       const Gemma3AttentionTensors& t, const KvCache& cache, void* workspace,
                                       size_t workspace_bytes, gk_stream_t stream) {
  GK_RETURN_IF_ERROR(gemma3_attention_check_cached(c, t, cache));
  return forward(handle, c, t, &cache, workspace, workspace_bytes, stream);
}

}  // namespace gk
