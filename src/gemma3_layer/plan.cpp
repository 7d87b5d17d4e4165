#include "gemma3_layer/plan.hpp"

#include <cmath>
#include <cstdint>

#include "attention/params.hpp"
#include "common/status_util.hpp"
#include "common/workspace.hpp"
#include "gemma3_layer/operands.hpp"

namespace gk::gemma3 {

namespace {

// The planner's thresholds; docs/dispatch.md gives the measurements behind each.
// The split-K q|k|v kernel (norm and RoPE in its epilogue) at a single row tile, where the weight stream bounds the
// step and one kernel spread over most SMs beats cuBLASLt + the pass; past it cuBLASLt's mainloop wins (perf log v4,
// v7, v22-v26).
constexpr int64_t kSplitkMaxRows = 128;
// The few-row kernel (both projections) up to one m16 tile, where the steps are their weight streams (perf log v32).
constexpr int64_t kSkinnyMaxRows = kSkinnyProjMaxRows;
// W_o into L2 ahead of the O projection only at a single row tile, where that projection streams its weights;
// with more rows it is compute-bound and the prefetch only slowed the attention (v12). Not with a cache: there the
// attention streams the cache, and the prefetch took DRAM from it for less than it saved the O projection (v48).
constexpr int64_t kPrefetchMaxRows = 128;
// A strided-batch GEMM's weight distance must fit what cuBLASLt's batch stride takes.
constexpr uintptr_t kMaxBatchDistance = uintptr_t(1) << 40;

// The few-row kernel's residency for these operands' unit (queried at handle creation): 0 for 128 columns, 1 for 256.
int skinny_unit_index(const SkinnyProjOperands& o) { return o.unit == 128 ? 0 : 1; }

// Whether the few-row kernel can take these operands on this device (0 CTAs per SM: the occupancy query answered
// nothing).
bool skinny_fits(const SkinnyProjOperands& o, const detail::DeviceInfo& dev) {
  return skinny_proj_supported(o) && dev.skinny_proj_blocks_per_sm[skinny_unit_index(o)] > 0;
}

// The few-row kernel's K split on this device.
SkinnyProjPlan plan_skinny(const SkinnyProjOperands& o, const detail::DeviceInfo& dev) {
  const int i = skinny_unit_index(o);
  return plan_skinny_proj(o, int64_t(dev.sms) * dev.skinny_proj_blocks_per_sm[i], dev.skinny_proj_clusters[i]);
}

}  // namespace

void plan_qkv_step(const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t, const LayerBuffers& ws,
                   const detail::DeviceInfo& dev, const detail::Overrides& ov, LayerPlan* plan) {
  LayerPlan& p = *plan;
  const int64_t rows = c.batch * c.seq_len, D = c.head_dim, Hq = c.num_q_heads, Hkv = c.num_kv_heads;

  // k and v as one strided-batch GEMM unless pinned separate; it decides the packed rows' column order everywhere.
  const bool kv_batch_ok = ov.kv_gemm != 1;
  const auto w_q = reinterpret_cast<uintptr_t>(t.q_proj_weight.data);
  const auto w_k = reinterpret_cast<uintptr_t>(t.k_proj_weight.data);
  const auto w_v = reinterpret_cast<uintptr_t>(t.v_proj_weight.data);
  p.v_first = kv_batch_ok && w_v < w_k;

  const ProjGemmOperands qkv = qkv_operands(c, t, ws, p.v_first);
  const SkinnyProjOperands skinny = skinny_operands(qkv, static_cast<int>(D), c.seq_len);
  const bool splitk_ok = D == kSplitkProjHeadDim && splitk_proj_supported(qkv);
  if (skinny_fits(skinny, dev) &&
      (ov.qkv == static_cast<int8_t>(QkvKernel::kSkinny) || (ov.qkv == detail::kAuto && rows <= kSkinnyMaxRows))) {
    p.qkv = QkvKernel::kSkinny;
    p.skinny = plan_skinny(skinny, dev);
  } else if (splitk_ok && ov.qkv != 1) {
    const bool one_wave = rows <= kSplitkMaxRows && splitk_proj_tiles(qkv, 1) <= dev.sms;
    if (ov.qkv == 0 || one_wave) {
      p.qkv = QkvKernel::kSplitk;
      p.splitk = plan_splitk_proj(qkv, dev);
    }
  }
  if (p.qkv == QkvKernel::kCublas) {
    const uintptr_t q_bytes = uintptr_t(Hq * D) * uintptr_t(c.hidden) * 2;
    const uintptr_t kv_bytes = uintptr_t(Hkv * D) * uintptr_t(c.hidden) * 2;
    const uintptr_t first_kv = p.v_first ? w_v : w_k, second_kv = p.v_first ? w_k : w_v;
    p.qkv_one_gemm = kv_batch_ok && first_kv == w_q + q_bytes && second_kv == first_kv + kv_bytes;
    const uintptr_t kv_distance = p.v_first ? w_k - w_v : w_v - w_k;
    p.kv_batched = kv_batch_ok && kv_distance > 0 && kv_distance < kMaxBatchDistance;
    if (p.kv_batched) p.kv_batch_stride = static_cast<int64_t>(kv_distance / 2);  // bf16 elements
  }
  p.chosen.qkv = static_cast<int8_t>(p.qkv);
  p.chosen.kv_gemm = kv_batch_ok ? 0 : 1;
}

void plan_o_projection(const SkinnyProjOperands& o, const detail::DeviceInfo& dev, const detail::Overrides& ov,
                       LayerPlan* plan) {
  const bool skinny = skinny_fits(o, dev) && (ov.o_proj == static_cast<int8_t>(OProjKernel::kSkinny) ||
                                              (ov.o_proj == detail::kAuto && o.m <= kSkinnyMaxRows));
  plan->o_proj = skinny ? OProjKernel::kSkinny : OProjKernel::kCublas;
  plan->o_skinny = skinny ? plan_skinny(o, dev) : SkinnyProjPlan{};
  plan->chosen.o_proj = static_cast<int8_t>(plan->o_proj);
}

bool attend_prefetches_o(const detail::Overrides& ov) {
  return ov.o_prefetch != detail::kAuto && ov.o_prefetch != static_cast<int8_t>(OPrefetch::kNone);
}

Status plan_layer(const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t, const detail::DeviceInfo& dev,
                  const detail::Overrides& ov, LayerPlan* plan, bool capturing, bool cached) {
  LayerPlan p;
  // Sizes and alignment only: any 256-byte aligned base gives the workspace's alignment.
  const LayerBuffers ws = carve_layer(c, reinterpret_cast<void*>(detail::WorkspaceCarver::kAlign));
  plan_qkv_step(c, t, ws, dev, ov, &p);
  const int64_t rows = c.batch * c.seq_len, D = c.head_dim;
  const bool splitk = p.qkv == QkvKernel::kSplitk;
  if (ov.o_prefetch == detail::kAuto) {
    p.o_prefetch = rows > kPrefetchMaxRows || cached ? OPrefetch::kNone
                                           : (splitk ? OPrefetch::kProjection : OPrefetch::kAttention);
  } else {
    p.o_prefetch = static_cast<OPrefetch>(ov.o_prefetch);
    if (p.o_prefetch == OPrefetch::kProjection && !splitk) p.o_prefetch = OPrefetch::kNone;  // only that kernel asks
  }

  plan_o_projection(o_proj_operands(c, ws, t.o_proj_weight.data, t.out.data), dev, ov, &p);
  GK_RETURN_IF_ERROR(plan_attention(attention_shape(attention_params(c, t, ws, p.v_first), static_cast<int>(D)), dev,
                                    ov, &p.attention));

  p.chosen.o_prefetch = static_cast<int8_t>(p.o_prefetch);
  record_attention_choices(p.attention, &p.chosen);
  if (p.qkv != QkvKernel::kCublas) {  // then at least the q|k|v kernel and the attention's
    p.graph = !capturing && ov.launch != 0;
    p.chosen.launch = p.graph ? 1 : 0;
  }
  *plan = p;
  return Status::Ok();
}

}  // namespace gk::gemma3
