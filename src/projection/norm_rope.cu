// Per-head RMSNorm with (offset + w) and RoPE (rotate_half convention), in place on the q and k heads of the
// packed projection output (k's first head at NormRopeParams::k_head0). A warp works on a token's heads in four
// passes: D / 8 lanes per head (a half-warp at D = 128, 8 heads per item; the whole warp at 256, 4 heads), lane l of
// it holding dims 8l..8l+7 (16 bytes), so the RoPE partner d +/- D/2 sits in lane l ^ (D / 16), and the token's
// cos/sin serve all the warp's heads. The pass is a stream (read q|k once,
// write once); what set its speed was first the bytes in flight (each lane issues its four head loads before any
// arithmetic, 64 registers so 4 blocks of 256 threads fit an SM), then the instruction count (bf16 RoPE, 8 heads
// per warp). A cp.async double-buffered variant with persistent warps was slower (docs/perf-log.md v9).
// Rounding follows the layer's definition: the normalized head is rounded to bf16, each RoPE product is rounded,
// then their sum.
#include <cuda_bf16.h>

#include "common/kernel_launch.hpp"
#include "common/cuda_check.hpp"
#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"
#include "projection/projection.hpp"

namespace gk::gemma3 {

namespace {

constexpr int kWarpsPerBlock = 8;

// The lanes of a head and the heads of a warp's work item, by head dim: four passes either way, so the registers
// the loads hold (64 per thread, 4 blocks per SM) are the same.
template <int kHeadDim>
struct NormRopeShape {
  static constexpr int kLanes = kHeadDim / 8;            // lanes per head, 8 dims each
  static constexpr int kHeadsPerPass = 32 / kLanes;      // heads side by side in the warp
  static constexpr int kPasses = 4;
  static constexpr int kHeadsPerItem = kHeadsPerPass * kPasses;
  static_assert(kHeadDim == 128 || kHeadDim == 256, "a half-warp or a warp per head");
};

__device__ __forceinline__ uint4 load16(const __nv_bfloat16* p) { return *reinterpret_cast<const uint4*>(p); }

// A load that ptxas keeps where it is written (it otherwise defers later heads' loads to save registers).
__device__ __forceinline__ uint4 load16_now(const __nv_bfloat16* p) {
  uint4 r;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

// Element e (0..7) of eight packed bf16 values, as fp32.
__device__ __forceinline__ float elem(const uint4& r, int e) {
  const uint32_t w = e < 2 ? r.x : e < 4 ? r.y : e < 6 ? r.z : r.w;
  return __uint_as_float(e % 2 == 0 ? w << 16 : w & 0xffff0000u);
}

// Work items per token: groups of kHeadsPerItem heads over q and k.
template <int kHeadDim>
__host__ __device__ __forceinline__ int item_groups(const NormRopeParams& p) {
  constexpr int kHeadsPerItem = NormRopeShape<kHeadDim>::kHeadsPerItem;
  return (p.num_q_heads + p.num_kv_heads + kHeadsPerItem - 1) / kHeadsPerItem;
}

// Where one lane's data of a work item lives. A head past the last one reads the last head (its result is not
// stored), so every load is unconditional.
template <int kPasses>
struct Item {
  __nv_bfloat16* x[kPasses];
  bool live[kPasses];
  bool q[kPasses];
  int64_t row;
};

// `half`: which of the pass's heads the lane works on (0 at D = 256).
template <int kHeadDim, int kPasses = NormRopeShape<kHeadDim>::kPasses>
__device__ __forceinline__ Item<kPasses> locate(const NormRopeParams& p, int64_t item, int groups, int half, int d0) {
  constexpr int kHeadsPerPass = NormRopeShape<kHeadDim>::kHeadsPerPass;
  Item<kPasses> it;
  it.row = item / groups;
  const int head0 = static_cast<int>(item - it.row * groups) * NormRopeShape<kHeadDim>::kHeadsPerItem;
  const int heads = p.num_q_heads + p.num_kv_heads;
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const int head = head0 + kHeadsPerPass * i + half;
    it.live[i] = head < heads;
    it.q[i] = head < p.num_q_heads;
    const int h = min(head, heads - 1);  // the q heads, then the k heads, which start at column head k_head0
    const int column_head = h < p.num_q_heads ? h : p.k_head0 + h - p.num_q_heads;
    it.x[i] = p.qkv + it.row * p.row_stride + column_head * kHeadDim + d0;
  }
  return it;
}

// The lane's eight (offset + w) factors of a q head or a k head (the weights are L1-resident).
__device__ __forceinline__ void weight_factors(const NormRopeParams& p, bool q, int d0, float (&w)[8]) {
  const uint4 raw = load16((q ? p.q_norm_weight : p.k_norm_weight) + d0);
#pragma unroll
  for (int e = 0; e < 8; ++e) w[e] = p.weight_offset + elem(raw, e);
}

// Normalizes, rotates and stores one item's heads from their raw values. Full warp.
//
// With every product in fp32 the pass was instruction-bound (docs/perf-log.md v9), so RoPE runs on bf16 pairs with
// one rounding per operation. y and cos/sin are bf16, so a product's fp32 value is
// exact unless it falls below 2^-134, where both it and the single rounding give the same signed zero; and the
// fp32 sum of two bf16 values rounded to bf16 equals the single rounding of the exact sum (when their exponents
// differ by more than 15 the smaller one is below a quarter of the larger's bf16 ulp, so both round to the
// larger). The results are bit-identical to the fp32 formulation: tests/host/bf16_rounding_test.cpp checks both
// identities bit for bit over every non-NaN bf16 value against partners of every class. The _rn forms compile
// to mul.rn / add.rn.bf16x2, which keep subnormals and are never fused into an fma (the build uses no fast-math
// flags, which would flush the fp32 formulation instead).
// kUniform: every head of the item is a q head or every one a k head (num_q_heads a multiple of kHeadsPerItem), so
// the lane's (offset + w) factors come once per item in `wo` instead of a load and eight adds per head.
template <int kHeadDim, bool kUniform, int kPasses = NormRopeShape<kHeadDim>::kPasses>
__device__ __forceinline__ void finish(const NormRopeParams& p, const Item<kPasses>& it, const uint4 (&x)[kPasses],
                                       const uint4& c, const uint4& s, const float (&wo)[8], int d0, int hl) {
  constexpr int kLanes = NormRopeShape<kHeadDim>::kLanes;
  // Every head's sum of squares first: the reductions interleave.
  float ss[kPasses];
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    ss[i] = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) ss[i] += elem(x[i], e) * elem(x[i], e);
  }
#pragma unroll
  for (int off = kLanes / 2; off > 0; off >>= 1) {  // within the head's lanes
#pragma unroll
    for (int i = 0; i < kPasses; ++i) ss[i] += __shfl_xor_sync(0xffffffffu, ss[i], off);
  }
  // rotate_half: dims below D/2 take -x[d + D/2], dims above take x[d - D/2]; the sign goes on sin.
  const uint32_t neg = hl < kLanes / 2 ? 0x80008000u : 0u;
  const uint32_t cw[4] = {c.x, c.y, c.z, c.w};
  const uint32_t sw[4] = {s.x ^ neg, s.y ^ neg, s.z ^ neg, s.w ^ neg};
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const float r = rsqrtf(ss[i] * (1.f / kHeadDim) + p.eps);
    float w[8];
    if constexpr (kUniform) {
#pragma unroll
      for (int e = 0; e < 8; ++e) w[e] = wo[e];
    } else {
      weight_factors(p, it.q[i], d0, w);
    }
    uint32_t out[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float y0 = elem(x[i], 2 * j) * r * w[2 * j];
      const float y1 = elem(x[i], 2 * j + 1) * r * w[2 * j + 1];
      const uint32_t y = device::pack_bf16x2(y0, y1);
      const uint32_t partner = __shfl_xor_sync(0xffffffffu, y, kLanes / 2);
      out[j] = device::rope_bf16x2(y, partner, cw[j], sw[j]);
    }
    if (it.live[i]) *reinterpret_cast<uint4*>(it.x[i]) = make_uint4(out[0], out[1], out[2], out[3]);
  }
}

// One item per warp, its loads all issued before any arithmetic and held in registers.
template <int kHeadDim>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, 4) norm_rope_kernel(const NormRopeParams p) {
  using Shape = NormRopeShape<kHeadDim>;
  // Launched programmatically behind the q|k|v or the k|v GEMM, this block may run before that GEMM ends: wait for
  // it before touching q|k. The attention behind this pass may launch at once: it waits for this grid's completion, and
  // through every block's wait here also sees the GEMM's k and v (so no block may leave before this wait). A
  // no-op pair otherwise.
  device::grid_dependency_wait();
  device::launch_dependents();
  const int groups = item_groups<kHeadDim>(p);
  const int64_t item = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (item >= p.rows * groups) return;  // whole warps leave together: the shuffles stay full-warp
  const int lane = threadIdx.x % 32, half = lane / Shape::kLanes, hl = lane % Shape::kLanes, d0 = hl * 8;
  const auto it = locate<kHeadDim>(p, item, groups, half, d0);
  uint4 x[Shape::kPasses];
#pragma unroll
  for (int i = 0; i < Shape::kPasses; ++i) x[i] = load16_now(it.x[i]);
  const uint4 c = load16(p.cos + it.row * kHeadDim + d0);
  const uint4 s = load16(p.sin + it.row * kHeadDim + d0);
  float wo[8];  // kUniform only
  if (p.num_q_heads % Shape::kHeadsPerItem == 0) {  // uniform over the grid
    weight_factors(p, it.q[0], d0, wo);
    finish<kHeadDim, true>(p, it, x, c, s, wo, d0, hl);
  } else {
    finish<kHeadDim, false>(p, it, x, c, s, wo, d0, hl);
  }
}

}  // namespace

Status launch_norm_rope(const NormRopeParams& p, int head_dim, bool programmatic, cudaStream_t stream) {
  if (head_dim != 128 && head_dim != 256) {
    return detail::error(GK_STATUS_NOT_SUPPORTED, "gemma3_attention: no norm/RoPE kernel for head_dim %d", head_dim);
  }
  const int64_t items = p.rows * (head_dim == 128 ? item_groups<128>(p) : item_groups<256>(p));
  const int64_t blocks = (items + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > INT32_MAX) {
    return detail::error(GK_STATUS_INVALID_ARGUMENT, "gemma3_attention: %lld token-heads exceed the norm grid",
                         static_cast<long long>(items));
  }
  return detail::launch_now("gemma3_attention", "norm/RoPE kernel launch",
                            head_dim == 128 ? norm_rope_kernel<128> : norm_rope_kernel<256>,
                            {dim3(static_cast<unsigned>(blocks)), kWarpsPerBlock * 32, 0, false, programmatic}, stream, p);
}

}  // namespace gk::gemma3
