// Host-side entry points of the audio QKV kernels: each makes the launches of its part of an AudioPlan (plan.hpp),
// in stream order, for the operator to issue (launch_graph.hpp: one after another, or as one graph launch).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "audio_qkv/params.hpp"
#include "common/device_props.hpp"
#include "common/kernel_launch.hpp"
#include "common/launch_graph.hpp"
#include "gk/gk.hpp"

namespace gk::audio {

struct AudioPlan;

// The kernels' shared-memory opt-ins, and the split-K kernels' and the persistent kernel's cluster residency into the
// device description (at handle creation).
Status prepare_audio_kernels(detail::DeviceInfo* dev);
// The fp16 kernels' part of it (qkv_f16_launch.cu).
Status prepare_f16_kernels(detail::DeviceInfo* dev);

// The split-K tf32 kernel (qkv_tf32_splitk_sm90.cuh): q|k|v on tensor cores, v's inputs rounded to nearest and q's and
// k's read truncated, q and k normalized in the epilogue. With plan.activations_prepass the activations are rounded
// into `scratch` (scratch_floats floats of workspace) by a pass first. Fills k_blocks and qk_truncated itself.
Status prepare_qkv_tf32_splitk(const QkvGemmParams& params, const AudioPlan& plan, float* scratch,
                               int64_t scratch_floats, detail::LaunchList* out);
// The exact mode's split-K kernel (qkv_tf32x3_splitk_sm90.cuh): the same grid and epilogue on 3xTF32 (big + small
// tf32 parts of every operand, the tensor-core sums promoted into fp32 every K-block). With
// plan.activations_prepass the activations' two parts are written into `scratch` (2 M x K floats) by a pass first.
Status prepare_qkv_tf32x3_splitk(const QkvGemmParams& params, const AudioPlan& plan, float* scratch,
                                 int64_t scratch_floats, detail::LaunchList* out);
// The persistent tf32 path: one launch of the head-tiled GEMM (q and k read truncated) with v's weights rounded into
// `rounded_wv` (heads * 128 * hidden floats of workspace) by the kernel itself or a pass before it, as the plan says;
// stream-K as the plan says. `sk_scratch` (workspace the call does not otherwise use) holds stream-K's state and the
// weight rounding's slots, under `epoch`, the call's (gk_handle_st::next_epoch).
Status prepare_qkv_tf32_persistent(const QkvGemmParams& params, const AudioPlan& plan, float* rounded_wv,
                                   void* sk_scratch, size_t sk_scratch_bytes, uint64_t epoch, detail::LaunchList* out);

// The passes' launches. dst[i * elems_each + j] = src[i][j] rounded to tf32 for the tensor cores
// (device::round_tf32_for_mma), i < count (1..3); the launch that reads dst may be a programmatic dependent. `sms`
// sizes the grid (plan.sms).
Status prepare_round_tf32(const float* const* src, int count, float* dst, int64_t elems_each, int sms,
                          detail::KernelLaunch* out);
// dst[0 .. elems) = the big tf32 parts of src, dst[elems .. 2 elems) = the small parts (the 3xTF32 operand parts);
// the launch that reads dst may be a programmatic dependent.
Status prepare_tf32x3_parts(const float* src, float* dst, int64_t elems, int sms, detail::KernelLaunch* out);

// The audio projection on fp16 tensor cores (qkv_f16_splitk_sm90.cuh): passes make the activations' and the weights'
// fp16 operands with their row exponents (f16_rows.cuh) into `f16`'s buffers - one term (the tf32 mode) or two (the
// exact mode: the lo rows after the hi rows) - then the split-K grid runs on them as the last pass's programmatic
// dependent. Fills k_blocks, a_exps and w_exps itself.
struct F16Operands {
  int terms;         // 1 or 2
  uint16_t* a;       // [terms * M, K]
  uint16_t* w;       // [terms * 3 * H * 128, K]: q's rows, k's, v's (then their lo rows)
  int32_t* a_exps;   // [M]
  int32_t* w_exps;   // [3 * H * 128]
};
// `weights_prepared`: f16.w and f16.w_exps already hold the weights' operands (gk_audio_qkv_prepare): no weight pass.
Status prepare_qkv_f16_splitk(const QkvGemmParams& params, const AudioPlan& plan, const F16Operands& f16,
                              bool weights_prepared, detail::LaunchList* out);
// The pass's launch: each of `count` (1..4) matrices of rows x k floats to fp16 bits with its rows' scale
// exponents (all with lo terms, the exact mode, or none).
Status prepare_f16_rows(const F16Matrix* mats, int count, int k, detail::KernelLaunch* out);
// The three weights' matrices (p.wq, p.wk, p.wv: rows of p.k_dim floats, heads * 128 each) into `w` ([terms * 3 * H *
// 128, K] fp16: q's rows, k's, v's, then with two terms their lo rows) and `w_exps` ([3 * H * 128]), at out[0..2].
void f16_weight_matrices(const QkvGemmParams& p, int terms, uint16_t* w, int32_t* w_exps, F16Matrix* out);
// The matrices of a call's pass: the activations, then (unless `weights_prepared`) q's, k's and v's weights, into
// f16's buffers. Returns the count.
int f16_call_matrices(const QkvGemmParams& p, const F16Operands& f16, bool weights_prepared, F16Matrix (&out)[kMaxF16Matrices]);

// In place on x[rows, heads*128]: each head -> x / sqrt(mean(x^2) + eps) * w. (The operator runs one launch for
// q and one for k, each beside the next projection GEMM.)
Status launch_head_rmsnorm(float* x, const float* w, int64_t rows, int heads, int head_dim, float eps,
                           cudaStream_t stream);

}  // namespace gk::audio
