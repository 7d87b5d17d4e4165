// The decode kernel: attention of a few new tokens per sequence over a key/value cache, at the cache's streaming
// rate. One CTA takes one 16-row block of the query rows of a (sequence, kv head) - the group's heads x the new
// tokens, so each cached byte serves every head of the group - and one split of that sequence's key range
// (decode_plan.hpp). K/V tiles of 64 keys stream through a three-stage cp.async ring; each of the four warps takes 16
// keys of a tile, with its own online softmax, and the warps' states merge in shared memory at the end. With one
// split the CTA writes the output; with more it writes its unnormalized rows and their (maximum, sum) to
// p.decode_partial, and decode_combine_kernel merges the splits.
#pragma once

#include <cuda_bf16.h>

#include <cfloat>
#include <cstdint>

#include "attention/attention_sm80.cuh"
#include "attention/decode_plan.hpp"
#include "attention/mask_policy.cuh"
#include "attention/params.hpp"
#include "attention/softmax.cuh"
#include "common/device/kv_cache.cuh"
#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"

namespace gk::gemma3 {

template <int kHeadDim_>
struct DecodeTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = kDecodeRows;
  static constexpr int kKeys = kDecodeKeys;
  static constexpr int kWarpKeys = kKeys / kWarps;  // 16: one k16 step of P*V per warp and tile
  static constexpr int kStages = 3;
  // Q's fragments stay in registers at head_dim 128; at 256 the output accumulators take 128 registers and Q's
  // fragments are read from shared memory per tile instead (as the sm80 kernel does at 256).
  static constexpr bool kQInRegisters = kHeadDim <= 128;
  static constexpr int kChunksPerRow = kHeadDim / 8;
  static constexpr int kTileQ = kRows * kHeadDim;
  static constexpr int kTileKV = kKeys * kHeadDim;
  // Q, then kStages K tiles and kStages V tiles; the warps' merge reuses the K/V space.
  static constexpr size_t kMergeBytes = size_t(kWarps) * kRows * (kHeadDim + 2) * sizeof(float);
  static constexpr size_t kSmemBytes = size_t(kTileQ + 2 * kStages * kTileKV) * sizeof(__nv_bfloat16);
  static_assert(kWarpKeys == 16 && kHeadDim % 16 == 0, "tile shape");
  static_assert(kMergeBytes <= size_t(2 * kStages * kTileKV) * sizeof(__nv_bfloat16), "the merge fits the ring");
};

// Query row r of row block rb of a group: head r / seq_len of the group, new token r % seq_len.
struct DecodeRow {
  int head, token;
  bool valid;
};
__device__ __forceinline__ DecodeRow decode_row(const AttentionParams& p, int rb, int r) {
  const int gr = rb * kDecodeRows + r;
  return {gr / p.seq_len, gr % p.seq_len, gr < p.group_size * p.seq_len};
}

template <class Tr, bool kSoftcap, MaskMode kMask>
__global__ void __launch_bounds__(Tr::kThreads) attention_decode_kernel(const AttentionParams p) {
  using bf16 = __nv_bfloat16;
  static_assert(kMask != MaskMode::kAdditive, "a cache takes causal, sliding-window or no masking");
  constexpr int kHeadDim = Tr::kHeadDim, kKSteps = kHeadDim / 16, kDTiles = kHeadDim / 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* s_q = reinterpret_cast<bf16*>(smem_raw);
  bf16* s_k = s_q + Tr::kTileQ;
  bf16* s_v = s_k + Tr::kStages * Tr::kTileKV;

  device::grid_dependency_wait();
  device::launch_dependents();  // the combine step (or the O projection) may launch: it waits for this grid's end
  const int z = blockIdx.x, rb = blockIdx.y;
  const int b = blockIdx.z / (p.num_q_heads / p.group_size), kvh = blockIdx.z % (p.num_q_heads / p.group_size);
  const int S = p.seq_len;
  // The cached length clamped as the cache write clamps it (a length past the host's bound stays inside the cache).
  const int cached = device::cached_tokens(p.kv_lens[b], p.kv_capacity, S);
  const int key_len = cached + S;
  // The first key a query sees: the window's, or a left-padded sequence's first real token.
  const int start = p.kv_starts != nullptr ? max(0, min(p.kv_starts[b], key_len)) : 0;
  const int lo = max(start, MaskPolicy<kMask>::kWindow ? max(0, cached - (p.window - 1)) : 0);
  const DecodeRange range = decode_range(lo, key_len, gridDim.x, z);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  const bf16* k = p.k + b * p.k_batch_stride + kvh * p.k_head_stride;
  const bf16* v = p.v + b * p.v_batch_stride + kvh * p.v_head_stride;
  const bf16* q_group = p.q + b * p.q_batch_stride + int64_t(kvh) * p.group_size * p.q_head_stride;
  // The Q block: rows from several heads and tokens (decode_row), padding rows zero.
#pragma unroll
  for (int i = 0; i < Tr::kRows * Tr::kChunksPerRow / Tr::kThreads; ++i) {
    const int idx = tid + i * Tr::kThreads, r = idx / Tr::kChunksPerRow, c = idx % Tr::kChunksPerRow;
    const DecodeRow row = decode_row(p, rb, r);
    const bf16* src = q_group + (row.valid ? row.head * p.q_head_stride + row.token * p.q_token_stride : 0) + c * 8;
    device::cp_async_16(device::smem_addr(s_q + swizzle<kHeadDim>(r, c)), src, row.valid);
  }
  const auto load_kv = [&](int t, int stage) {
    const int n0 = (range.lo_tile + t) * Tr::kKeys;
    load_tile<Tr, Tr::kKeys>(s_k + stage * Tr::kTileKV, k, p.k_token_stride, n0, key_len, tid);
    load_tile<Tr, Tr::kKeys>(s_v + stage * Tr::kTileKV, v, p.v_token_stride, n0, key_len, tid);
  };
#pragma unroll
  for (int i = 0; i < Tr::kStages - 1; ++i) {  // one group per stage, empty or not, so the waits count evenly
    if (range.t0 + i < range.t1) load_kv(range.t0 + i, i);
    device::cp_async_commit();
  }
  if (tid == 0 && p.l2_prefetch_bytes != 0) {
    const uint64_t cta = (uint64_t(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    device::bulk_prefetch_l2_share(p.l2_prefetch, p.l2_prefetch_bytes, cta,
                                   uint64_t(gridDim.x) * gridDim.y * gridDim.z);
  }

  // Thread (lane) holds rows lane/4 and lane/4 + 8, columns 2 (lane % 4) + {0, 1} of each n8 tile; their positions
  // among the keys, for the mask (a padding row sees every key: it is never stored).
  int key_rows[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const DecodeRow row = decode_row(p, rb, (lane >> 2) + 8 * i);
    key_rows[i] = row.valid ? cached + row.token : key_len - 1;
  }
  const float scale = logit_scale<kSoftcap, kMask>(p);
  RowSoftmax softmax;
  float acc_o[kDTiles][4];
#pragma unroll
  for (int i = 0; i < kDTiles; ++i) acc_o[i][0] = acc_o[i][1] = acc_o[i][2] = acc_o[i][3] = 0.f;
  uint32_t q_frag[Tr::kQInRegisters ? kKSteps : 1][4];
  const auto q_fragment = [&](int ks, uint32_t (&f)[4]) {
    device::ldmatrix_x4(device::smem_addr(s_q + swizzle<kHeadDim>(lane & 15, ks * 2 + (lane >> 4))), f);
  };

  for (int t = range.t0; t < range.t1; ++t) {
    const int i = t - range.t0, stage = i % Tr::kStages;
    device::cp_async_wait<Tr::kStages - 2>();  // tile t (and the Q block) have landed
    __syncthreads();                             // ... for every thread, and every warp is done with tile t - 1
    if constexpr (Tr::kQInRegisters) {
      if (i == 0) {
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) q_fragment(ks, q_frag[ks]);
      }
    }
    if (t + Tr::kStages - 1 < range.t1) load_kv(t + Tr::kStages - 1, (i + Tr::kStages - 1) % Tr::kStages);
    device::cp_async_commit();

    // This warp's 16 keys: scores, logits, the online softmax, then P*V.
    const int key0 = warp * Tr::kWarpKeys;
    const bf16* s_kb = s_k + stage * Tr::kTileKV;
    float acc_s[2][4] = {};
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      uint32_t kf[4];
      const int key = key0 + (lane & 7) + ((lane >> 4) << 3);
      device::ldmatrix_x4(device::smem_addr(s_kb + swizzle<kHeadDim>(key, ks * 2 + ((lane >> 3) & 1))), kf);
      uint32_t(&qf)[4] = q_frag[Tr::kQInRegisters ? ks : 0];
      if constexpr (!Tr::kQInRegisters) q_fragment(ks, qf);
      device::mma_bf16_16816(acc_s[0], qf, kf[0], kf[1]);
      device::mma_bf16_16816(acc_s[1], qf, kf[2], kf[3]);
    }
    const int n0 = (range.lo_tile + t) * Tr::kKeys + key0;
    const bool edge = n0 + Tr::kWarpKeys > key_len ||
                      (MaskPolicy<kMask>::kCausal && n0 + Tr::kWarpKeys - 1 > cached) ||
                      (MaskPolicy<kMask>::kWindow && key_len - 1 - n0 >= p.window);
    scores_to_logits<kSoftcap, kMask, 2>(acc_s, p, b, nullptr, key_rows, n0, lane, edge, kMaskNone, nullptr, false,
                                         key_len);
    if (n0 < start) hide_before<2>(acc_s, n0 + 2 * (lane & 3), start);
    softmax.update<2, kDTiles>(acc_s, acc_o, scale);
    uint32_t p_frag[1][4];
    pack_p(acc_s, p_frag);
    const bf16* s_vb = s_v + stage * Tr::kTileKV;
#pragma unroll
    for (int dp = 0; dp < kDTiles / 2; ++dp) {
      uint32_t vf[4];
      const int key = key0 + (lane & 7) + (((lane >> 3) & 1) << 3);
      device::ldmatrix_x4_trans(device::smem_addr(s_vb + swizzle<kHeadDim>(key, dp * 2 + (lane >> 4))), vf);
      device::mma_bf16_16816(acc_o[2 * dp], p_frag[0], vf[0], vf[1]);
      device::mma_bf16_16816(acc_o[2 * dp + 1], p_frag[0], vf[2], vf[3]);
    }
  }
  device::cp_async_wait<0>();
  __syncthreads();  // the ring is free: the warps' states go there

  // Each warp's rows: its (maximum in base-2 logits, sum) and its unnormalized output.
  float* s_ml = reinterpret_cast<float*>(s_k);                 // [warp][row][2]
  float* s_o = s_ml + Tr::kWarps * Tr::kRows * 2;               // [warp][row][kHeadDim]
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = (lane >> 2) + 8 * i;
    float l = softmax.row_sum[i];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if ((lane & 3) == 0) {
      s_ml[(warp * Tr::kRows + r) * 2] = softmax.row_max[i] * scale;
      s_ml[(warp * Tr::kRows + r) * 2 + 1] = l;
    }
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
      float* o = s_o + (warp * Tr::kRows + r) * kHeadDim + dt * 8 + 2 * (lane & 3);
      o[0] = acc_o[dt][2 * i];
      o[1] = acc_o[dt][2 * i + 1];
    }
  }
  __syncthreads();

  // Thread tid merges row tid / 8, columns (tid % 8) * kHeadDim / 8 onwards, over the four warps.
  constexpr int kCols = kHeadDim / 8;
  const int r = tid / 8, c0 = (tid % 8) * kCols;
  const DecodeRow row = decode_row(p, rb, r);
  if (!row.valid) return;
  float m = -INFINITY;
#pragma unroll
  for (int w = 0; w < Tr::kWarps; ++w) m = fmaxf(m, s_ml[(w * Tr::kRows + r) * 2]);
  float weight[Tr::kWarps], l = 0.f;
#pragma unroll
  for (int w = 0; w < Tr::kWarps; ++w) {
    const float mw = s_ml[(w * Tr::kRows + r) * 2];
    weight[w] = mw == -INFINITY ? 0.f : device::ex2_approx(mw - m);  // a warp that saw no key adds nothing
    l += weight[w] * s_ml[(w * Tr::kRows + r) * 2 + 1];
  }
  float out[kCols];
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    out[j] = 0.f;
#pragma unroll
    for (int w = 0; w < Tr::kWarps; ++w) out[j] += weight[w] * s_o[(w * Tr::kRows + r) * kHeadDim + c0 + j];
  }
  const int h = kvh * p.group_size + row.head;
  if (gridDim.x == 1) {
    const float inv = l > 0.f ? 1.f / l : 0.f;
    bf16* o = p.o + b * p.o_batch_stride + h * p.o_head_stride + row.token * p.o_token_stride + c0;
#pragma unroll
    for (int j = 0; j < kCols; j += 8) {
      uint4 packed;
      packed.x = device::pack_bf16x2(out[j] * inv, out[j + 1] * inv);
      packed.y = device::pack_bf16x2(out[j + 2] * inv, out[j + 3] * inv);
      packed.z = device::pack_bf16x2(out[j + 4] * inv, out[j + 5] * inv);
      packed.w = device::pack_bf16x2(out[j + 6] * inv, out[j + 7] * inv);
      *reinterpret_cast<uint4*>(o + j) = packed;
    }
    return;
  }
  // Partial rows [split][b][h][token]: kHeadDim floats, then after all of them the (maximum, sum) pairs.
  const int64_t rows = int64_t(p.batch) * p.num_q_heads * S;
  const int64_t index = int64_t(z) * rows + (int64_t(b) * p.num_q_heads + h) * S + row.token;
  float* po = p.decode_partial + index * kHeadDim + c0;
#pragma unroll
  for (int j = 0; j < kCols; j += 4) *reinterpret_cast<float4*>(po + j) = make_float4(out[j], out[j + 1], out[j + 2], out[j + 3]);
  if (c0 == 0) {
    float* ml = p.decode_partial + int64_t(gridDim.x) * rows * kHeadDim + index * 2;
    ml[0] = m;
    ml[1] = l;
  }
}

// Merges the splits of every query row: one CTA per row, its four warps on every fourth split each (a float4 of
// each 128 columns per lane), several splits' loads in flight per warp, the warps' sums added in shared memory.
template <int kHeadDim>
__global__ void __launch_bounds__(128) decode_combine_kernel(const AttentionParams p) {
  constexpr int kVecs = kHeadDim / 128, kWarps = 4;  // float4 columns per lane
  static_assert(kHeadDim % 128 == 0, "whole float4s per lane");
  __shared__ float s_m[kWarps], s_l[kWarps];
  __shared__ float4 s_acc[kWarps][kHeadDim / 4];
  // Launched programmatically behind the decode kernel: the O projection after it may launch now and stream its
  // weights, and this step waits here for the decode kernel's partials.
  device::launch_dependents();
  device::grid_dependency_wait();
  const int64_t rows = int64_t(p.batch) * p.num_q_heads * p.seq_len;
  const int64_t row = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int splits = p.decode_splits;
  const float* ml = p.decode_partial + int64_t(splits) * rows * kHeadDim;
  float m = -INFINITY;
  for (int z = threadIdx.x; z < splits; z += 32 * kWarps) m = fmaxf(m, ml[(z * rows + row) * 2]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) s_m[warp] = m;
  __syncthreads();
  m = fmaxf(fmaxf(s_m[0], s_m[1]), fmaxf(s_m[2], s_m[3]));
  float4 acc[kVecs];
#pragma unroll
  for (int c = 0; c < kVecs; ++c) acc[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  float l = 0.f;
#pragma unroll 4
  for (int z = warp; z < splits; z += kWarps) {
    const float mz = ml[(z * rows + row) * 2];
    const float w = mz == -INFINITY ? 0.f : device::ex2_approx(mz - m);  // a split with no key adds nothing
    l += w * ml[(z * rows + row) * 2 + 1];
    const float* src = p.decode_partial + (z * rows + row) * kHeadDim + lane * 4;
#pragma unroll
    for (int c = 0; c < kVecs; ++c) {
      const float4 o = *reinterpret_cast<const float4*>(src + c * 128);
      acc[c].x += w * o.x;
      acc[c].y += w * o.y;
      acc[c].z += w * o.z;
      acc[c].w += w * o.w;
    }
  }
  if (lane == 0) s_l[warp] = l;
#pragma unroll
  for (int c = 0; c < kVecs; ++c) s_acc[warp][c * 32 + lane] = acc[c];
  __syncthreads();
  if (warp != 0) return;
  l = s_l[0] + s_l[1] + s_l[2] + s_l[3];
  const float inv = l > 0.f ? 1.f / l : 0.f;
  const int token = static_cast<int>(row % p.seq_len);
  const int h = static_cast<int>((row / p.seq_len) % p.num_q_heads);
  const int b = static_cast<int>(row / (int64_t(p.seq_len) * p.num_q_heads));
  __nv_bfloat16* o = p.o + b * p.o_batch_stride + h * p.o_head_stride + token * p.o_token_stride + lane * 4;
#pragma unroll
  for (int c = 0; c < kVecs; ++c) {
    float4 sum = s_acc[0][c * 32 + lane];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) {
      const float4 x = s_acc[w][c * 32 + lane];
      sum.x += x.x;
      sum.y += x.y;
      sum.z += x.z;
      sum.w += x.w;
    }
    uint2 packed;
    packed.x = device::pack_bf16x2(sum.x * inv, sum.y * inv);
    packed.y = device::pack_bf16x2(sum.z * inv, sum.w * inv);
    *reinterpret_cast<uint2*>(o + c * 128) = packed;
  }
}

}  // namespace gk::gemma3
