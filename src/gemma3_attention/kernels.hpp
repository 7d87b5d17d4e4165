// Host-side entry points of the Gemma3 attention kernels (implemented in .cu files).
#pragma once

#include <cuda_runtime_api.h>

#include "gemma3_attention/params.hpp"
#include "gk/gk.hpp"

namespace gk::gemma3 {

Status launch_norm_rope(const NormRopeParams& p, int head_dim, cudaStream_t stream);
Status launch_attention(AttentionParams p, int head_dim, cudaStream_t stream);

}  // namespace gk::gemma3
