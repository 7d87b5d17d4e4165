// Host-side entry points of the audio QKV kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gk/gk.hpp"

namespace gk::audio {

struct QkvGemmParams;

// The fused tf32 path: q|k|v projections on tensor cores, v's inputs rounded to nearest and q's and k's truncated,
// q and k normalized in the epilogue (qkv_tf32_splitk_sm90.cuh). Fills k_blocks and qk_truncated itself.
// `scratch` (scratch_floats floats of workspace) takes the activations rounded to tf32 (v's CTAs then round only
// their weight tile in shared memory) whenever they fit; GK_AUDIO_SPLIT_A=smem rounds both in shared memory instead.
Status launch_qkv_gemm_tf32(const QkvGemmParams& params, float* scratch, int64_t scratch_floats, cudaStream_t stream);
// The tf32 workspace (floats): v's weights rounded, for the persistent kernel, or the split kernel's rounded
// activations, whichever is larger, the activations counted only up to three weights' worth (the split kernel runs
// only for one wave of tiles, so its M stays small; beyond, it rounds them in shared memory).
int64_t tf32_scratch_floats(int64_t rows, int64_t hidden, int64_t heads);

// Which kernel runs the tf32 mode: cuBLASLt + the norm kernel, the split kernel (qkv_tf32_splitk_sm90.cuh: one head per
// 128-row tile, K split over a cluster for small grids, the weights rounded in shared memory and the activations
// by a pass before it, or both in shared memory when they do not fit the scratch) or the persistent
// head-tiled GEMM (projection/head_gemm: A rounded in registers, the weights from a rounded copy in the workspace).
enum class Tf32Path { kCublas, kSplit, kPersistent };

// The split kernel where its tiles fit in one wave (one launch beats three cuBLASLt GEMMs and a norm kernel
// there), the persistent one beyond, cuBLASLt where the persistent kernel's units fill a second round of clusters
// less than 70%. GK_AUDIO_TF32_PATH=fused|cublas|split|persistent pins the choice, within what the
// pinned kernel can take (fused: the split kernel for one wave, the persistent one beyond).
Status qkv_gemm_tf32_chosen(int64_t rows, int64_t hidden, int64_t heads, Tf32Path* path);

// The persistent tf32 path: one GEMM launch (q and k read truncated) with v's weights rounded into `rounded_wv`
// (heads * 128 * hidden floats of workspace) by the kernel itself where that pays (head_gemm/weight_prep.cuh),
// else by a pass before it; stream-K where head_gemm/stream_k_plan.hpp takes it. `sk_scratch` (workspace the call
// does not otherwise use) holds stream-K's state and the weight preparation's slots, under `epoch`, the call's
// (gk_handle_st::next_epoch).
Status launch_qkv_head_gemm_tf32(const QkvGemmParams& params, float* rounded_wv, void* sk_scratch,
                                 size_t sk_scratch_bytes, uint64_t epoch, cudaStream_t stream);
// dst[i * elems_each + j] = src[i][j] rounded to tf32 for the tensor cores (device::round_tf32_for_mma), i < count
// (1..3); the launch that reads dst may be a programmatic dependent.
Status launch_round_tf32(const float* const* src, int count, float* dst, int64_t elems_each, cudaStream_t stream);

// The exact mode's fused path: the same grid and epilogue on 3xTF32 (big + small tf32 parts of every operand, the
// tensor-core sums promoted into fp32 every K-block: qkv_tf32x3_splitk_sm90.cuh). Taken wherever the kernel can take
// the shape; GK_AUDIO_EXACT_PATH=fused|cublas pins the choice (cublas: fp32 FMA GEMMs).
Status qkv_gemm_exact_chosen(int64_t rows, int64_t hidden, int64_t heads, bool* fused);
// `scratch` (scratch_floats floats of workspace) takes the activations split into big and small parts (2 M x K),
// so the kernel splits only the weights in shared memory, whenever they fit; GK_AUDIO_EXACT_A=smem splits both
// in shared memory instead.
Status launch_qkv_gemm_3xtf32(const QkvGemmParams& params, float* scratch, int64_t scratch_floats,
                              cudaStream_t stream);
// dst[0 .. elems) = the big parts of src, dst[elems .. 2 elems) = the small parts (the 3xTF32 split); the launch that
// reads dst may be a programmatic dependent.
Status launch_split_tf32(const float* src, float* dst, int64_t elems, cudaStream_t stream);
// The scratch the exact mode reserves for the split activations: 2 M K floats where the fused kernel can take
// the shape and that stays within 256 MiB, else 0 (the kernel then splits both operands in shared memory).
int64_t exact_split_scratch_floats(int64_t rows, int64_t hidden, int64_t heads);

// In place on x[rows, heads*128]: each head -> x / sqrt(mean(x^2) + eps) * w. (The operator runs one launch for
// q and one for k, each beside the next projection GEMM.)
Status launch_head_rmsnorm(float* x, const float* w, int64_t rows, int heads, int head_dim, float eps,
                           cudaStream_t stream);

}  // namespace gk::audio
