// The Gemma3 layer's planner: (config, tensors, device, overrides) -> a LayerPlan, a plain value that says which
// kernel runs each step. Every threshold is in the table at the top of plan.cpp; docs/dispatch.md gives the
// measurements behind them. layer.cpp executes a plan and decides nothing.
#pragma once

#include "attention/attention_plan.hpp"
#include "common/device_props.hpp"
#include "common/overrides.hpp"
#include "common/internal_api.hpp"
#include "gk/gk.hpp"
#include "projection/skinny_proj_plan.hpp"
#include "projection/splitk_proj_plan.hpp"

namespace gk::gemma3 {

enum class QkvKernel { kSplitk, kCublas, kSkinny };  // the qkv override's values
enum class OProjKernel { kCublas, kSkinny };          // the o_proj override's values
// The values are the o_prefetch override's (off, attention, projection).
enum class OPrefetch : int8_t { kNone = 0, kAttention = 1, kProjection = 2 };

struct LayerBuffers;  // operands.hpp

struct LayerPlan {
  // The split-K kernel or the few-row kernel (norm and RoPE in their epilogues), or cuBLASLt + the pass.
  QkvKernel qkv = QkvKernel::kCublas;
  SplitkProjPlan splitk;               // qkv == kSplitk: its tiling
  SkinnyProjPlan skinny;               // qkv == kSkinny: its K split
  OProjKernel o_proj = OProjKernel::kCublas;
  SkinnyProjPlan o_skinny;             // o_proj == kSkinny: its K split
  // The packed rows' column order: v's heads before k's where k and v run as one strided-batch GEMM from v's
  // weights, which lie lower in memory (a batch stride must be positive).
  bool v_first = false;
  bool qkv_one_gemm = false;  // cuBLASLt: [Wq; Wk; Wv] back to back: one GEMM over all of N
  bool kv_batched = false;    // cuBLASLt: k and v as one strided-batch GEMM (else two GEMMs, the pass beside v's)
  int64_t kv_batch_stride = 0;  // kv_batched: elements from the lower of k's and v's weights to the other
  OPrefetch o_prefetch = OPrefetch::kNone;  // who asks L2 for W_o ahead of the O projection
  AttentionPlan attention;
  bool attention_programmatic = false;  // the attention launches behind a kernel that lets dependents start early
  // Where the q|k|v step is the library's own kernel, the call's kernels up to the O projection (and it too, on the
  // few-row kernel) go out as one CUDA graph launch (launch_graph.hpp), unless the stream is capturing or
  // `launch=stream` is pinned. After cuBLASLt's q|k|v GEMMs the launches go one after another.
  bool graph = false;
  detail::Overrides chosen;             // the choices above as override values (the plan's printable form)
};

// The q|k|v step's part of a plan alone (qkv, splitk, v_first, qkv_one_gemm, kv_batched and their choices).
// `ws`: the workspace layout the step writes its packed rows into (its sizes and alignment are what count).
void plan_qkv_step(const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t, const LayerBuffers& ws,
                   const detail::DeviceInfo& dev, const detail::Overrides& ov, LayerPlan* plan);
// The O projection's part of a plan alone (o_proj, o_skinny and its choice), for its operands (o_proj_operands).
void plan_o_projection(const SkinnyProjOperands& o, const detail::DeviceInfo& dev, const detail::Overrides& ov,
                       LayerPlan* plan);
// gk_gemma3_attend: whether its attention asks L2 for W_o ahead of the O projection (never by default: it reads a
// cache, as the layer's cached calls do; a pin of either asker means this one).
GK_INTERNAL_API bool attend_prefetches_o(const detail::Overrides& ov);
// `capturing`: the stream is capturing a CUDA graph (the launches then go into the caller's graph one by one).
// `cached`: a call with a key/value cache (its attention reads the cache; see kPrefetchMaxRows).
GK_INTERNAL_API Status plan_layer(const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t,
                                  const detail::DeviceInfo& dev, const detail::Overrides& ov, LayerPlan* plan,
                                  bool capturing = false, bool cached = false);

}  // namespace gk::gemma3
