// Host-side entry points of the attention kernels (attention_launch.cu, mask_tiles.cu).
#pragma once

#include <cuda_runtime_api.h>

#include "attention/params.hpp"
#include "gk/gk.hpp"

namespace gk::gemma3 {

struct AttentionPlan;  // attention_plan.hpp
// Runs the plan's kernel. Additive mode needs p.mask_scratch of mask_tile_scratch_bytes(batch, seq_len) for the
// per-call tile lists. `programmatic`: the kernel before it in `stream` is the split-K q|k|v kernel or the norm/RoPE
// pass, which let their dependents launch early (device::launch_dependents); the attention's CTAs then start on the
// SMs that kernel leaves free, set up, and wait for it (device::grid_dependency_wait) before reading anything. In
// additive mode the mask classification and the tile lists run in between, each programmatic behind the kernel
// before it.
Status launch_attention(AttentionParams p, int head_dim, const AttentionPlan& plan, bool programmatic,
                        cudaStream_t stream);
size_t mask_tile_scratch_bytes(int64_t batch, int64_t seq_len);
// Fills p->tiles for a kernel of block_m-row query blocks and block_n-key tiles (64 or 128 each). `programmatic`: as
// launch_attention's; the classification then runs beside the end of the kernel before it (mask_tiles.cu).
Status build_mask_tiles(AttentionParams* p, int block_m, int block_n, bool programmatic, cudaStream_t stream,
                        bool mark_bounded = false);

}  // namespace gk::gemma3
