// Host-side entry points of the audio QKV kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gk/gk.hpp"

namespace gk::audio {

// dst[i] = src[i] rounded to the nearest tf32 value (ties away from zero, as cvt.rna does). n % 4 == 0.
Status launch_round_tf32(const float* src, float* dst, int64_t n, cudaStream_t stream);

// In place on x[rows, heads*128]: each head -> x / sqrt(mean(x^2) + eps) * w.
Status launch_head_rmsnorm(float* x, const float* w, int64_t rows, int heads, int head_dim, float eps,
                           cudaStream_t stream);

}  // namespace gk::audio
