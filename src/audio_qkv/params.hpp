// Parameter block of the fused tf32 audio QKV kernel (qkv_tf32_splitk_sm90.cuh), filled on the host by operator.cpp.
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
  // `hidden` holds the activations already prepared for the tensor cores by a pass before the kernel (tf32:
  // rounded; 3xTF32: the big parts, then from row M the small ones); the kernel prepares only the weight tile.
  int a_prepared;
  // tf32: q's and k's CTAs read the caller's activations and weights as the tensor cores truncate them (their
  // norm removes truncation's bias); v's still round to nearest.
  int qk_truncated;
  float eps;
  // fp16 operands (qkv_f16_splitk_sm90.cuh): each activation row's and each weight row's scale exponent
  // (f16_rows.cuh; weights q's rows, then k's, then v's), divided back out of the accumulators in the epilogue.
  const int32_t* a_exps;
  const int32_t* w_exps;
};

// One matrix of `rows` x k floats (rows contiguous, k floats apart) and where its operands go.
struct F16Matrix {
  const float* src;
  int64_t rows;
  uint16_t* hi;    // [rows][k]: the one term (or the exact mode's hi term), fp16 bits
  uint16_t* lo;    // the exact mode's lo term, same layout; null for one term
  int32_t* exps;   // [rows]: each row's scale exponent (f16::scale_exponent)
};

inline constexpr int kMaxF16Matrices = 4;  // a pass's: the activations and three weights

}  // namespace gk::audio
