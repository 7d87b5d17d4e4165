// Host-side entry points of the audio QKV kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gk/gk.hpp"

namespace gk::audio {

// In place on q and k, each [rows, heads*128]: every head -> x / sqrt(mean(x^2) + eps) * w (q_weight for q,
// k_weight for k). One launch.
Status launch_head_rmsnorm(float* q, const float* q_weight, float* k, const float* k_weight, int64_t rows,
                           int heads, int head_dim, float eps, cudaStream_t stream);

}  // namespace gk::audio
