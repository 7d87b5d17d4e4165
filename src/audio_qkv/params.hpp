// Parameter block of the fused tf32 audio QKV kernel (qkv_gemm_sm90.cuh), filled on the host by operator.cpp.
#pragma once

#include <cstdint>

namespace gk::audio {

struct QkvGemmParams {
  const float* hidden;  // [M, K]
  const float* wq;      // [H*128, K] each
  const float* wk;
  const float* wv;
  const float* q_norm;  // [128]
  const float* k_norm;
  float* q;  // [M, H*128] each
  float* k;
  float* v;
  int m, k_dim, heads;
  int k_blocks;  // K-blocks (32 columns) per CTA: K / 32 / split
  int a_rounded;   // tf32 split kernel: `hidden` already holds tf32-rounded activations; only W is rounded in smem
  int a_presplit;  // 3xTF32 kernel: `hidden` holds 2M rows, the big parts then the small ones; only W is split
  float eps;
};

}  // namespace gk::audio
