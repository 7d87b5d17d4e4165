// Host-side entry points of the audio QKV kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gk/gk.hpp"

namespace gk::audio {

struct QkvGemmParams;

// The fused tf32 path: q|k|v projections on tensor cores with round-to-nearest inputs, q and k normalized in the
// epilogue (qkv_gemm_sm90.cuh). Fills k_blocks itself.
Status launch_qkv_gemm_tf32(const QkvGemmParams& params, cudaStream_t stream);

// Whether the tf32 call takes the fused kernel: where the kernel can take the shape and its 128-row x one-head
// tiles fit in one wave. There one launch (K split over a cluster when the grid is small) beats three cuBLASLt
// GEMMs and a norm kernel; past one wave cuBLASLt's mainloop is faster than the fused kernel's (~175 against ~370
// TFLOP/s at M = 8192 on the H200: docs/perf-log.md v3). GK_AUDIO_TF32_PATH=fused|cublas overrides the choice
// (within what the kernel can take).
Status qkv_gemm_tf32_chosen(int64_t rows, int64_t hidden, int64_t heads, bool* fused);

// The exact mode's fused path: the same grid and epilogue on 3xTF32 (big + small tf32 parts of every operand, the
// tensor-core sums promoted into fp32 every K-block: qkv_gemm_3xtf32_sm90.cuh). Taken wherever the kernel can take
// the shape; GK_AUDIO_EXACT_PATH=fused|cublas pins the choice (cublas: fp32 FMA GEMMs).
Status qkv_gemm_exact_chosen(int64_t rows, int64_t hidden, int64_t heads, bool* fused);
Status launch_qkv_gemm_3xtf32(const QkvGemmParams& params, cudaStream_t stream);

// In place on x[rows, heads*128]: each head -> x / sqrt(mean(x^2) + eps) * w. (The operator runs one launch for
// q and one for k, each beside the next projection GEMM.)
Status launch_head_rmsnorm(float* x, const float* w, int64_t rows, int heads, int head_dim, float eps,
                           cudaStream_t stream);

}  // namespace gk::audio
