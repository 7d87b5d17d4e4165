// Parameter blocks of the projection kernels: the norm/RoPE pass and the split-K projection GEMM.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

namespace gk::gemma3 {

// Per-head RMSNorm (scale offset + w) followed by RoPE, in place on the packed projection output
// qkv[M, row_stride] whose columns are [q heads | k heads | v heads], or [q | v | k] (k_head0). V heads are left
// untouched.
struct NormRopeParams {
  __nv_bfloat16* qkv;
  const __nv_bfloat16* cos;  // [M, head_dim]
  const __nv_bfloat16* sin;  // [M, head_dim]
  const __nv_bfloat16* q_norm_weight;
  const __nv_bfloat16* k_norm_weight;
  int64_t rows;        // M = B*S
  int64_t row_stride;  // elements between tokens in qkv
  int num_q_heads;
  int num_kv_heads;
  int k_head0;  // the 128-column head of qkv where k's first head lies: num_q_heads, or after v's heads
  float eps;
  float weight_offset;
};

// The head-tiled projection GEMM (splitk_proj_gemm_sm90.cuh): out = A[M, K] * W^T for up to three weights ("segments",
// e.g. Wq, Wk, Wv), each [heads * 128, K]; a CTA's output tile is one or two heads of one segment. Segments with
// a norm weight get the per-head RMSNorm (offset + w) and RoPE before the store; the others are stored as
// computed (rounded to bf16 once, after the fp32 accumulation over all of K).
struct ProjGemmParams {
  static constexpr int kMaxSegments = 3;
  int m;         // rows of A and of every output
  int k_blocks;  // 64-column K-blocks of the whole K (a K split shares them out)
  int seg_end[kMaxSegments];    // cumulative tiles: segment s owns tiles [seg_end[s-1], seg_end[s])
  int seg_heads[kMaxSegments];  // heads of each segment (its last tile may hold one)
  __nv_bfloat16* out[kMaxSegments];                // column 0 of each segment's first head
  const __nv_bfloat16* norm_weight[kMaxSegments];  // null: no norm and no RoPE
  int64_t out_row_stride;                          // elements, shared by the segments (one packed buffer)
  const __nv_bfloat16* cos;                        // [M, 128]
  const __nv_bfloat16* sin;
  float eps;
  float weight_offset;
  const void* l2_prefetch;  // ProjGemmOperands::l2_prefetch
  uint64_t l2_prefetch_bytes;
};

// The few-row projection (skinny_proj_gemm.cuh): out = A[M, K] * W^T for M <= 16 and up to three weights, each
// [tiles * unit, K] (a unit: one head of head_dim columns, or 128 output columns of the O projection). Segments with
// a norm weight get the per-head RMSNorm (offset + w) and RoPE before the store, as ProjGemmParams' do.
struct SkinnyProjParams {
  static constexpr int kMaxSegments = 3;
  const __nv_bfloat16* a;  // [m, k_chunks * 32], rows a_row_stride apart
  int64_t a_row_stride;
  int m;
  int k_chunks;  // 32-column chunks of K (a K split shares them out)
  const __nv_bfloat16* w[kMaxSegments];
  int seg_end[kMaxSegments];  // cumulative units: segment s owns units [seg_end[s-1], seg_end[s])
  const __nv_bfloat16* norm_weight[kMaxSegments];  // null: no norm and no RoPE
  // Where row r (token t = r % seq_len of sequence b = r / seq_len) of a segment's unit u lands: in packed rows,
  // out + r * out_row_stride + u * unit; per head (head_major), out + ((b * units + u) * capacity + pos) * unit with
  // pos = t, or t after the sequence's cached length (at_lens: lens[b], clamped as the attention clamps it).
  __nv_bfloat16* out[kMaxSegments];
  int64_t out_row_stride;
  bool head_major[kMaxSegments];
  bool at_lens[kMaxSegments];
  int capacity[kMaxSegments];
  int seq_len;
  const int* lens;
  const __nv_bfloat16* cos;  // [m, unit]
  const __nv_bfloat16* sin;
  float eps;
  float weight_offset;
};

}  // namespace gk::gemma3
