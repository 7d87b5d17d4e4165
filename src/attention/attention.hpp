// Host-side entry points of the attention kernels (attention_launch.cu, mask_tiles.cu).
#pragma once

#include <cuda_runtime_api.h>

#include "attention/params.hpp"
#include "common/kernel_launch.hpp"
#include "common/launch_graph.hpp"
#include "gk/gk.hpp"

namespace gk::gemma3 {

struct AttentionPlan;  // attention_plan.hpp

// The attention step's launches, prepared before the call's first launch: in additive mode the mask classification
// and the tile lists, then the plan's kernel.
struct AttentionLaunches {
  detail::KernelLaunch classify, list, kernel;
  // The decode kernel's merge of its splits: programmatic behind that kernel, waiting for it before reading.
  detail::KernelLaunch combine;
  // `programmatic`: the kernel before them in `stream` is the split-K q|k|v kernel or the norm/RoPE pass, which let
  // their dependents launch early (device::launch_dependents); the attention's CTAs then start on the SMs that
  // kernel leaves free, set up, and wait for it (device::grid_dependency_wait) before reading anything. In additive
  // mode the classification and the lists run in between, each programmatic behind the kernel before it (the
  // classification beside the end of the one before: mask_tiles.cu).
  Status issue(const char* op, bool programmatic, cudaStream_t stream) const;
  // The launches issue() makes, in its order, `programmatic` on all but the combine step (always programmatic: it
  // follows the decode kernel), added to `out` (a caller's list for one graph launch, or issue()'s own).
  Status append(bool programmatic, detail::LaunchList* out) const;
};

// Encodes the tensor maps and fills the parameters of the plan's launches. Additive mode needs p.mask_scratch of
// mask_tile_scratch_bytes(batch, seq_len) for the per-call tile lists.
Status prepare_attention(AttentionParams p, int head_dim, const AttentionPlan& plan, AttentionLaunches* out);
size_t mask_tile_scratch_bytes(int64_t batch, int64_t seq_len);
// The classification and list launches that fill p->tiles for a kernel of block_m-row query blocks and block_n-key
// tiles (64 or 128 each); p->tiles is set to the lists' place.
Status prepare_mask_tiles(AttentionParams* p, int block_m, int block_n, bool mark_bounded,
                          detail::KernelLaunch* classify, detail::KernelLaunch* list);
// The kernels' shared-memory opt-ins, once per device (at handle creation).
Status prepare_attention_kernels();
// The decode kernel's launches (attention_decode.cu; prepare_attention calls it for a decode plan), and its opt-ins.
Status prepare_decode(AttentionParams p, int head_dim, const AttentionPlan& plan, AttentionLaunches* out);
Status prepare_decode_kernels();

}  // namespace gk::gemma3
