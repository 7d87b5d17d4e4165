// Orchestration of one Gemma3 attention layer call: the projections into a packed q|k|v buffer with the per-head
// norm + RoPE (one fused kernel for few row tiles; else cuBLASLt GEMMs (one for q|k|v where the weights lie back to
// back, else q, then k and v as one batch) and an in-place norm/RoPE pass),
// attention reading q/k/v straight from the packed rows, and the O projection (fused kernel or cuBLASLt).
// All scalars the kernels need are folded here.
#include <cmath>

#include "common/env_choice.hpp"
#include "common/gemm.hpp"
#include "common/status_util.hpp"
#include "common/workspace.hpp"
#include "attention/attention.hpp"
#include "projection/projection.hpp"
#include "gemma3_layer/validate.hpp"
#include "api/handle.hpp"

namespace gk {

namespace {

constexpr const char* kOp = "gemma3_attention";
using bf16 = __nv_bfloat16;

struct Layout {
  bf16* qkv = nullptr;   // [M, (Hq + 2 Hkv) D]
  bf16* attn = nullptr;  // [M, Hq D]
  void* gemm_workspace = nullptr;
  void* mask_tiles = nullptr;  // additive mode: the attention's per-call tile lists
  size_t mask_tile_bytes = 0;
  size_t bytes = 0;
};

Layout carve(const Gemma3AttentionConfig& c, void* base) {
  detail::WorkspaceCarver w(base);
  const int64_t rows = c.batch * c.seq_len;
  Layout l;
  l.qkv = w.take<bf16>(rows * (c.num_q_heads + 2 * c.num_kv_heads) * c.head_dim);
  l.attn = w.take<bf16>(rows * c.num_q_heads * c.head_dim);
  l.gemm_workspace = w.take_bytes(detail::kGemmWorkspaceBytes);
  if (c.mask_mode == GK_MASK_ADDITIVE) {
    l.mask_tile_bytes = gemma3::mask_tile_scratch_bytes(c.batch, c.seq_len);
    l.mask_tiles = w.take_bytes(l.mask_tile_bytes);
  }
  l.bytes = w.bytes();
  return l;
}

gemma3::MaskMode to_mask_mode(gk_mask_mode m) {
  switch (m) {
    case GK_MASK_ADDITIVE:
      return gemma3::MaskMode::kAdditive;
    case GK_MASK_NONE:
      return gemma3::MaskMode::kNone;
    default:
      return gemma3::MaskMode::kCausal;
  }
}

// Who fetches the O projection's weights into L2 ahead of it: at a single row tile the O projection is bound by
// that weight stream (M = 128: 18.9 MB, about as long as a plain read of it after the cold scrub, docs/perf-log.md
// v12) while the end of the q|k|v kernel and the attention leave DRAM idle. The split q|k|v kernel asks once its
// mainloop is done, else the attention kernel as it starts. With more rows the projection is compute-bound and the
// prefetch only slowed the attention (M = 293-2048, v12). GK_O_PREFETCH=off|attention|projection pins it at any
// size (projection: nothing where the split kernel does not run q|k|v).
enum class OPrefetch { kNone, kAttention, kProjection };
constexpr int64_t kPrefetchMaxRows = 128;

Status o_weight_prefetch(int64_t rows, bool split_qkv, OPrefetch* who) {
  static const int forced = detail::env_choice("GK_O_PREFETCH", {"off", "attention", "projection"});
  if (forced == detail::kEnvInvalid) return detail::env_error(kOp, "GK_O_PREFETCH", "off|attention|projection");
  if (forced == detail::kEnvUnset) {
    *who = rows > kPrefetchMaxRows ? OPrefetch::kNone : (split_qkv ? OPrefetch::kProjection : OPrefetch::kAttention);
  } else {
    *who = forced == 0 ? OPrefetch::kNone : (forced == 1 ? OPrefetch::kAttention : OPrefetch::kProjection);
    if (*who == OPrefetch::kProjection && !split_qkv) *who = OPrefetch::kNone;
  }
  return Status::Ok();
}

// GK_KV_GEMM=batched|separate pins how the k and v projections run on the cuBLASLt path (tests run both; with q's,
// k's and v's weights back to back, batched means one GEMM for all three). It also decides the packed rows' column
// order on every path: v's before k's only where batched and v's weights lie lower.
Status kv_batch_allowed(bool* allowed) {
  static const int forced = detail::env_choice("GK_KV_GEMM", {"batched", "separate"});
  if (forced == detail::kEnvInvalid) return detail::env_error(kOp, "GK_KV_GEMM", "batched|separate");
  *allowed = forced != 1;
  return Status::Ok();
}

}  // namespace

Status gemma3_attention_workspace_size(const Gemma3AttentionConfig& config, size_t* bytes) {
  if (bytes == nullptr) return detail::error(GK_STATUS_INVALID_ARGUMENT, "%s: bytes is null", kOp);
  GK_RETURN_IF_ERROR(gemma3::check_config(config));
  *bytes = carve(config, nullptr).bytes;
  return Status::Ok();
}

Status gemma3_attention_forward(gk_handle_t handle, const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t,
                                void* workspace, size_t workspace_bytes, gk_stream_t stream_in) {
  GK_RETURN_IF_ERROR(gemma3_attention_check(c, t));
  GK_RETURN_IF_ERROR(detail::check_call(kOp, handle, workspace, workspace_bytes, carve(c, nullptr).bytes));
  auto stream = reinterpret_cast<cudaStream_t>(stream_in);
  const Layout ws = carve(c, workspace);

  const int64_t rows = c.batch * c.seq_len;
  const int64_t D = c.head_dim, Hq = c.num_q_heads, Hkv = c.num_kv_heads;
  const int64_t width = (Hq + 2 * Hkv) * D;
  // The packed q|k|v rows: q's heads, then k's and v's, or v's before k's when v's weights lie below k's in memory,
  // so that one strided-batch GEMM (positive strides) still writes both (the attention and the norm/RoPE pass take
  // the columns where they are).
  bool kv_batch_ok = false;  // validated before anything is enqueued
  GK_RETURN_IF_ERROR(kv_batch_allowed(&kv_batch_ok));
  const auto w_q = reinterpret_cast<uintptr_t>(t.q_proj_weight.data);
  const auto w_k = reinterpret_cast<uintptr_t>(t.k_proj_weight.data);
  const auto w_v = reinterpret_cast<uintptr_t>(t.v_proj_weight.data);
  const bool v_first = kv_batch_ok && w_v < w_k;
  bf16* q = ws.qkv;
  bf16* k = ws.qkv + (v_first ? Hq + Hkv : Hq) * D;
  bf16* v = ws.qkv + (v_first ? Hq : Hq + Hkv) * D;

  using detail::GemmKind;
  using detail::GemmShape;
  auto& gemm = handle->gemm;
  // batch > 1: that many projections of `heads` heads each, weights weight_stride elements apart, outputs side by
  // side in the packed rows.
  const auto proj = [&](const char* what, const void* w, int64_t heads, bf16* dst, int64_t batch = 1,
                        int64_t weight_stride = 0) {
    GemmShape shape{rows, heads * D, c.hidden, c.hidden, c.hidden, width, GemmKind::kBf16};
    shape.batch = batch;
    shape.batch_stride_b = weight_stride;
    shape.batch_stride_c = batch > 1 ? heads * D : 0;
    return gemm.run(what, shape, t.hidden_states.data, w, dst, ws.gemm_workspace, detail::kGemmWorkspaceBytes,
                    stream);
  };
  // A single row tile (M <= 128): one fused kernel for q|k|v with the norm and RoPE in its epilogue (split-K over a
  // cluster: the weight read dominates). Otherwise cuBLASLt GEMMs and the standalone norm/RoPE pass, unless
  // GK_PROJ_PATH pins a fused kernel.
  gemma3::ProjGemmOperands qkv_ops;
  qkv_ops.m = rows;
  qkv_ops.k = c.hidden;
  qkv_ops.a = static_cast<const bf16*>(t.hidden_states.data);
  qkv_ops.segments = 3;
  const gk_tensor* qkv_w[3] = {&t.q_proj_weight, &t.k_proj_weight, &t.v_proj_weight};
  const int64_t qkv_heads[3] = {Hq, Hkv, Hkv};
  bf16* qkv_out[3] = {q, k, v};
  for (int s = 0; s < 3; ++s) {
    qkv_ops.w[s] = static_cast<const bf16*>(qkv_w[s]->data);
    qkv_ops.heads[s] = qkv_heads[s];
    qkv_ops.out[s] = qkv_out[s];
  }
  qkv_ops.norm_weight[0] = static_cast<const bf16*>(t.q_norm_weight.data);
  qkv_ops.norm_weight[1] = static_cast<const bf16*>(t.k_norm_weight.data);
  qkv_ops.out_row_stride = width;
  qkv_ops.cos = static_cast<const bf16*>(t.cos.data);
  qkv_ops.sin = static_cast<const bf16*>(t.sin.data);
  qkv_ops.eps = c.rms_norm_eps;
  qkv_ops.weight_offset = c.norm_weight_offset;
  gemma3::ProjPath qkv_path = gemma3::ProjPath::kCublas;
  if (D == 128) GK_RETURN_IF_ERROR(gemma3::proj_path_chosen(qkv_ops, /*fused_by_default=*/true, &qkv_path));
  OPrefetch o_prefetch = OPrefetch::kNone;
  GK_RETURN_IF_ERROR(o_weight_prefetch(rows, qkv_path == gemma3::ProjPath::kSplit, &o_prefetch));
  const uint64_t o_weight_bytes = uint64_t(c.hidden) * uint64_t(Hq * D) * sizeof(bf16) / 16 * 16;
  if (o_prefetch == OPrefetch::kProjection) {
    qkv_ops.l2_prefetch = t.o_proj_weight.data;
    qkv_ops.l2_prefetch_bytes = o_weight_bytes;
  }
  // Whether the attention may launch programmatically: the kernel before it in `stream` is the split q|k|v kernel
  // or the norm/RoPE pass behind the q|k|v or the batched k|v GEMM (in additive mode the mask classification and the
  // tile lists come in between, each programmatic behind the kernel before it, and the attention behind the lists).
  bool attention_programmatic = qkv_path == gemma3::ProjPath::kSplit;
  if (qkv_path != gemma3::ProjPath::kCublas) {
    GK_RETURN_IF_ERROR(gemma3::launch_proj_gemm(qkv_ops, qkv_path, stream));
  } else {
    // Weights back to back in memory, [Wq; Wk; Wv] (views of one fused q|k|v weight, as serving engines keep it),
    // or [Wq; Wv; Wk] (then v's columns come first too): one GEMM over all of N writes the packed rows directly
    // (GK_KV_GEMM=separate keeps three GEMMs). A GEMM that cuBLASLt declines falls back, clearing any error its
    // attempt left, so that the next launch check does not report it.
    const uintptr_t q_bytes = uintptr_t(Hq * D) * uintptr_t(c.hidden) * sizeof(bf16);
    const uintptr_t kv_bytes = uintptr_t(Hkv * D) * uintptr_t(c.hidden) * sizeof(bf16);
    const uintptr_t first_kv = v_first ? w_v : w_k, second_kv = v_first ? w_k : w_v;
    bool qkv_one = kv_batch_ok && first_kv == w_q + q_bytes && second_kv == first_kv + kv_bytes;
    const auto fell_back = [] { (void)cudaGetLastError(); return false; };
    if (qkv_one) {
      qkv_one = proj("gemma3_attention: q|k|v projection", t.q_proj_weight.data, Hq + 2 * Hkv, q).ok() || fell_back();
    }
    if (!qkv_one) GK_RETURN_IF_ERROR(proj("gemma3_attention: q projection", t.q_proj_weight.data, Hq, q));
    // k and v have one shape: one strided-batch GEMM for both (any distance between their weights; from the lower
    // one, whose columns come first in the packed rows: v_first), which fills twice the SMs where the row tiles are
    // few ((2, 293): 10.9 + 11.2 us as two GEMMs, docs/perf-log.md v16) and saves a launch gap. Otherwise two GEMMs,
    // the norm/RoPE pass on the side stream beside v's. Addresses as integers: the two weights are separate
    // allocations (both 16-byte aligned: validate.cpp). A distance past 2^40 bytes (what a TMA descriptor's stride
    // holds) keeps them separate, and so does a batched GEMM that cuBLASLt declines (nothing of it was enqueued).
    const uintptr_t kv_distance = v_first ? w_k - w_v : w_v - w_k;
    bool kv_batched = !qkv_one && kv_batch_ok && kv_distance > 0 && kv_distance < (uintptr_t(1) << 40);
    if (kv_batched) {
      const auto stride = static_cast<int64_t>(kv_distance / sizeof(bf16));
      kv_batched = (v_first ? proj("gemma3_attention: v|k projection", t.v_proj_weight.data, Hkv, v, 2, stride).ok()
                            : proj("gemma3_attention: k|v projection", t.k_proj_weight.data, Hkv, k, 2, stride).ok()) ||
                   fell_back();
    }
    if (!qkv_one && !kv_batched) {
      GK_RETURN_IF_ERROR(proj("gemma3_attention: k projection", t.k_proj_weight.data, Hkv, k));
    }

    gemma3::NormRopeParams nr{};
    nr.qkv = ws.qkv;
    nr.cos = qkv_ops.cos;
    nr.sin = qkv_ops.sin;
    nr.q_norm_weight = qkv_ops.norm_weight[0];
    nr.k_norm_weight = qkv_ops.norm_weight[1];
    nr.rows = rows;
    nr.row_stride = width;
    nr.num_q_heads = static_cast<int>(Hq);
    nr.num_kv_heads = static_cast<int>(Hkv);
    nr.k_head0 = static_cast<int>((k - ws.qkv) / D);
    nr.eps = c.rms_norm_eps;
    nr.weight_offset = c.norm_weight_offset;
    // The norm/RoPE pass (memory-bound, q and k columns only): behind the q|k|v or the batched k|v GEMM on the main
    // stream, or on the handle's side stream beside the v projection (compute-bound, v columns only), the attention
    // waiting for both. Beside or behind the v projection measured the same (docs/perf-log.md v9): the GEMM's CTAs
    // take whole SMs.
    if (qkv_one || kv_batched) {
      // Programmatic behind the GEMM (its launch overlaps the GEMM's tail), and the attention behind it.
      GK_RETURN_IF_ERROR(gemma3::launch_norm_rope(nr, static_cast<int>(D), /*programmatic=*/true, stream));
      attention_programmatic = true;
    } else {
      detail::SideScope side(handle->side, kOp, stream);
      GK_RETURN_IF_ERROR(side.fork());
      GK_RETURN_IF_ERROR(gemma3::launch_norm_rope(nr, static_cast<int>(D), /*programmatic=*/false, side.stream()));
      GK_RETURN_IF_ERROR(proj("gemma3_attention: v projection", t.v_proj_weight.data, Hkv, v));
      GK_RETURN_IF_ERROR(side.join());
    }
  }

  gemma3::AttentionParams ap{};
  ap.q = q;
  ap.k = k;
  ap.v = v;
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
  ap.group_size = static_cast<int>(Hq / Hkv);
  const float scale = c.query_scale > 0.f ? c.query_scale : static_cast<float>(1.0 / std::sqrt(double(D)));
  ap.softcap = c.softcap > 0.f;
  ap.scale_log2 = scale * gemma3::kLog2e;
  ap.softcap_in = ap.softcap ? static_cast<float>(double(scale) / c.softcap) : 0.f;
  ap.softcap_out = ap.softcap ? c.softcap * gemma3::kLog2e : 0.f;
  ap.mask_mode = to_mask_mode(c.mask_mode);
  ap.mask_scratch = ws.mask_tiles;
  ap.mask_scratch_bytes = ws.mask_tile_bytes;
  if (o_prefetch == OPrefetch::kAttention) {
    ap.l2_prefetch = t.o_proj_weight.data;
    ap.l2_prefetch_bytes = o_weight_bytes;
  }
  // Behind the split q|k|v kernel or the norm/RoPE pass (same stream) the attention launches early and waits for
  // it on the device.
  GK_RETURN_IF_ERROR(
      gemma3::launch_attention(ap, static_cast<int>(D), attention_programmatic, stream));

  gemma3::ProjGemmOperands o_ops;
  o_ops.m = rows;
  o_ops.k = Hq * D;
  o_ops.a = ws.attn;
  o_ops.segments = 1;
  o_ops.w[0] = static_cast<const bf16*>(t.o_proj_weight.data);
  o_ops.heads[0] = c.hidden / 128;
  o_ops.out[0] = static_cast<bf16*>(t.out.data);
  o_ops.out_row_stride = c.hidden;
  gemma3::ProjPath o_path = gemma3::ProjPath::kCublas;
  // The fused kernels' O projection is correct everywhere but has not beaten cuBLASLt at a suite shape (M = 128:
  // 13.9 against 10.0 us; launched programmatically behind the attention, its first weight stages loading while the
  // attention ran, the attention took 4.6 us longer and the layer 41.6 against 36.6 us: docs/perf-log.md v17), so it
  // runs only when pinned (tests keep it covered).
  if (c.hidden % 128 == 0) GK_RETURN_IF_ERROR(gemma3::proj_path_chosen(o_ops, /*fused_by_default=*/false, &o_path));
  if (o_path != gemma3::ProjPath::kCublas) return gemma3::launch_proj_gemm(o_ops, o_path, stream);
  const GemmShape o_shape{rows, c.hidden, Hq * D, Hq * D, Hq * D, c.hidden, GemmKind::kBf16};
  return gemm.run("gemma3_attention: o projection", o_shape, ws.attn, t.o_proj_weight.data, t.out.data,
                  ws.gemm_workspace, detail::kGemmWorkspaceBytes, stream);
}

}  // namespace gk
