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

// The exact mode's 3xTF32 operands (split_tf32.cu): each segment's [rows, k] fp32 source becomes [rows, 3k] in
// dst, activations as [big | big | small], weights as [big | small | big], big and small rounded to nearest tf32.
struct Split3xTf32Segment {
  const float* src = nullptr;
  float* dst = nullptr;
  int64_t rows = 0;
  bool weights = false;
  int64_t end4 = 0;  // filled by the launch: cumulative float4 count
};
struct Split3xTf32Params {
  static constexpr int kMaxSegments = 4;
  Split3xTf32Segment seg[kMaxSegments];
  int segments = 0;
  int64_t k = 0;  // a multiple of 4
};
Status launch_split_3xtf32(const Split3xTf32Params& params, cudaStream_t stream);

// In place on x[rows, heads*128]: each head -> x / sqrt(mean(x^2) + eps) * w. (The operator runs one launch for
// q and one for k, each beside the next projection GEMM.)
Status launch_head_rmsnorm(float* x, const float* w, int64_t rows, int heads, int head_dim, float eps,
                           cudaStream_t stream);

}  // namespace gk::audio
