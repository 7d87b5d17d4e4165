// The audio QKV operator's planner: (config, device, overrides, stream state) -> an AudioPlan, a plain value that
// says which kernel runs and how. Every threshold is in the table at the top of plan.cpp (docs/dispatch.md gives
// the measurements); operator.cpp and qkv_launch.cu execute the plan and decide nothing.
#pragma once

#include <cstdint>

#include "common/device_props.hpp"
#include "common/overrides.hpp"
#include "common/internal_api.hpp"
#include "gk/gk.hpp"
#include "projection/head_gemm/head_gemm_plan.hpp"

namespace gk::audio {

enum class AudioPath {
  kCublas,      // cuBLASLt GEMMs (tf32 or fp32) + the norm kernel
  kSplitkTf32,  // the split-K tf32 kernel (qkv_tf32_splitk_sm90.cuh)
  kPersistentTf32,  // the persistent head GEMM (projection/head_gemm) with the audio epilogue
  kSplitkTf32x3,    // the exact mode's split-K 3xTF32 kernel (qkv_tf32x3_splitk_sm90.cuh)
  kSplitkF16,       // fp16 tensor cores: an operand pass, then the split-K grid (qkv_f16_splitk_sm90.cuh); one fp16
                    // term in tf32 mode (tf32's rounding), two in exact mode
};

struct AudioPlan {
  AudioPath path = AudioPath::kCublas;
  int sms = 0;  // the device's, for the grids of the preparing passes
  // Split-K kernels.
  int split = 1;                     // CTAs per cluster along K
  bool activations_prepass = false;  // the activations prepared into the workspace by a pass (else in shared memory)
  bool v_registers = false;          // tf32: v's CTAs round their weights in registers (no rounding warps)
  // The persistent kernel.
  head_gemm::GridPlan grid;          // clusters and the stream-K plan
  bool v_round_in_kernel = false;    // v's weights rounded by the kernel's idle producer warps (else a pass first)
  bool lag_last_segment = false;     // v's tiles of the first row pairs behind q's and k's (unit_order.hpp)
  // One term, no K split: the persistent ping-pong kernel (qkv_f16_pingpong_sm90.cuh), a tile per consumer
  // warpgroup; otherwise the cooperative split-K grid (qkv_f16_splitk_sm90.cuh), one tile a CTA for both.
  bool f16_pingpong = false;
  // The ping-pong kernel's heads a tile: 1 (128 rows x one head) or 2 (64 rows x two heads; an even head count).
  int f16_heads = 1;
  // The ping-pong kernel's CTAs a cluster (2: each loads half of a tile's weight rows and multicasts them to both),
  // and how many such clusters are resident (the grid).
  int f16_cluster = 1;
  int f16_clusters = 0;
  // A pass and its GEMM go out as one CUDA graph launch (no host call between them), unless the stream is
  // capturing (the caller's graph then holds both) or `launch=stream` is pinned.
  bool graph = false;
  detail::Overrides chosen;          // the choices as override values (the plan's printable form)
};

// The split-K kernels' tile, 128 rows x one head, in K-blocks of 32 floats (qkv_launch.cu checks it against their
// traits); the one head dim the audio kernels instantiate (validated by operator.cpp).
inline constexpr int kSplitkBM = 128, kSplitkBK = 32;
inline constexpr int64_t kAudioHeadDim = 128;

// The persistent head GEMM's operands for a call, shapes only: three segments (q, k, v) of `heads` heads each.
GK_INTERNAL_API head_gemm::Operands persistent_shape(int64_t rows, int64_t hidden, int64_t heads);

// Grid limits of the split-K kernels (grid.y row tiles, a whole number of 32-float K-blocks, ints).
GK_INTERNAL_API bool splitk_supported(int64_t rows, int64_t hidden, int64_t heads);
// Workspace floats: tf32, v's rounded weights (persistent) or the rounded activations (split-K), whichever is larger,
// the activations counted only up to three weights' worth; exact, the activations' two tf32 parts while they stay
// within 256 MiB (else the kernel splits them in shared memory).
GK_INTERNAL_API int64_t tf32_scratch_floats(int64_t rows, int64_t hidden, int64_t heads);
GK_INTERNAL_API int64_t exact_scratch_floats(int64_t rows, int64_t hidden, int64_t heads);
// The fp16 kernel's K-block (fp16 columns).
inline constexpr int kF16BK = 64;
// Whether the fp16 path's activations (terms x rows x hidden fp16) stay within the workspace's bound (256 MiB, as
// the exact mode's split activations): the workspace holds the fp16 operands only then, and the path runs only then.
GK_INTERNAL_API bool f16_fits(int64_t rows, int64_t hidden, int terms);

// The fp16 path's plan for a call of `rows` rows with `terms` fp16 terms: the split-K grid's K split. Prepared weights
// always take this path.
GK_INTERNAL_API AudioPlan plan_audio_f16(int64_t rows, int64_t hidden, int64_t heads, int terms,
                                         const detail::DeviceInfo& dev, const detail::Overrides& ov, bool capturing);
// How many kernels a call on `plan` launches (0 on the cuBLASLt path, whose launches are cuBLASLt's).
GK_INTERNAL_API int plan_launches(const AudioPlan& plan);
// `capturing`: the stream is capturing a CUDA graph (the kernel's own v rounding hands slices over under the call's
// epoch, which a replay repeats, so a pass rounds them there). `sk_scratch_bytes`: the workspace the persistent
// kernel may use for stream-K's state and the v rounding's slots.
GK_INTERNAL_API Status plan_audio(const AudioQkvConfig& c, const detail::DeviceInfo& dev, const detail::Overrides& ov,
                                  bool capturing, size_t sk_scratch_bytes, AudioPlan* plan);

}  // namespace gk::audio
