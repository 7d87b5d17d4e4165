// The layer's steps, as the fused call (layer.cpp) and the two split calls (split_ops.cpp) run them: the q|k|v step,
// the heads' scatter out of the packed rows, the attention over a key/value cache, the O projection. Host code.
#pragma once

#include <cuda_runtime_api.h>

#include <initializer_list>
#include <utility>

#include "attention/attention.hpp"
#include "common/kernel_launch.hpp"
#include "gemma3_layer/head_scatter.hpp"
#include "gemma3_layer/operands.hpp"
#include "gemma3_layer/plan.hpp"
#include "gk/gk.hpp"

namespace gk::gemma3 {

// The q|k|v step, prepared: the packed rows' operands and, on the split-K or the few-row kernel, its launch (which asks L2 for
// `l2_prefetch` bytes, if given, while it runs).
struct QkvStep {
  ProjGemmOperands operands;
  detail::KernelLaunch launch;  // the split-K or the few-row kernel
};
Status prepare_qkv_step(const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t, const LayerBuffers& ws,
                        const LayerPlan& plan, const void* l2_prefetch, uint64_t l2_prefetch_bytes, QkvStep* step);
// Issues the step; *programmatic: its last kernel lets the next one launch as a programmatic dependent.
Status issue_qkv_step(gk_handle_t handle, const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t,
                      const LayerBuffers& ws, const LayerPlan& plan, QkvStep& step, cudaStream_t stream,
                      bool* programmatic);

// On the few-row kernel, the step writes the heads `sp` would scatter straight to the scatter's destinations (the
// other heads still into the packed rows), and *folded says the scatter need not run. On the other kernels, or
// where the kernel cannot take those destinations, the step is unchanged and *folded false.
Status fold_head_scatter(const Gemma3AttentionConfig& c, const LayerBuffers& ws, const LayerPlan& plan,
                         const HeadScatterParams& sp, QkvStep* step, bool* folded);

// A scatter of the packed rows' k and v heads into the cache, at each sequence's cached length.
HeadScatterParams cache_scatter(const Gemma3AttentionConfig& c, const QkvStep& step, const LayerBuffers& ws,
                                const KvCache& cache);

// Keys, values and lengths from the cache in `ap` (whose queries and output stay), and the mask over cached + new
// keys; then the plan: the decode kernel for few new tokens, else a prefill kernel's cached form (the planner's).
void use_cache(const Gemma3AttentionConfig& c, const KvCache& cache, AttentionParams* ap);
// max_keys: the host's bound on cached + new tokens. Few new tokens take the decode kernel (ap.decode_partial set).
Status plan_cached_attention(gk_handle_t handle, const AttentionParams& ap, int head_dim, int64_t max_keys,
                             AttentionPlan* plan);

// The call writes its workspace while it reads or writes these: none may share a byte with it.
Status check_workspace_apart(const char* op, void* workspace, size_t workspace_bytes,
                             std::initializer_list<std::pair<const char*, const gk_tensor*>> tensors);
// ... the cache's tensors, in particular.
Status check_workspace_apart(const char* op, void* workspace, size_t workspace_bytes, const KvCache& cache);

// The few-row O projection's launch (plan.o_proj is kSkinny) into `launch` (a list's slot: null when the list is
// full), programmatic behind the attention's last kernel, which it always follows.
Status prepare_o_skinny(const Gemma3AttentionConfig& c, const LayerBuffers& ws, const LayerPlan& plan,
                        const void* o_proj_weight, void* out, detail::KernelLaunch* launch);
// out = ws.attn W_o^T, on the kernel the plan's o_proj names; issued right after the attention's last kernel.
Status run_o_projection(gk_handle_t handle, const Gemma3AttentionConfig& c, const LayerBuffers& ws,
                        const LayerPlan& plan, const void* o_proj_weight, void* out, cudaStream_t stream);

}  // namespace gk::gemma3
