// Flash-attention forward for sm_80-class tensor cores (ldmatrix + mma.sync, cp.async double buffering): the sm80
// kernel, which also serves Hopper where the sm90 kernel (attention_sm90.cuh) does not apply or its grid of 128-row
// tiles is too small (attention_launch.cu). One CTA owns kBlockM query rows of one (batch, query head); each warp owns
// 16 rows. K/V tiles stream through a two-stage shared-memory ring; P stays in registers as the A operand of P*V; the
// softmax is online, in fp32, in the log2 domain. GQA: query head h reads kv head h / group_size. Causal: tiles above
// the diagonal are never loaded, and only tiles that cross the diagonal or the sequence end pay for per-element
// masking. Additive: the key tiles come from the per-call tile list (64-row blocks, 64-key tiles), which leaves out
// tiles the mask kills and says which tiles read it.
#pragma once

#include <cuda_bf16.h>

#include <cfloat>
#include <cstdint>

#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"
#include "attention/tile_scheduler.cuh"
#include "attention/softmax.cuh"
#include "attention/params.hpp"

namespace gk::gemma3 {

// The sm80 kernel's shape: kBlockM query rows per CTA (16 per warp), kBlockN keys per key tile, heads of kHeadDim.
template <int kBlockM_, int kBlockN_, int kHeadDim_, int kWarps_>
struct AttentionTraits {
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kWarps = kWarps_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kChunksPerRow = kHeadDim / 8;  // 16-byte chunks per row
  static constexpr int kTileQ = kBlockM * kHeadDim;    // elements
  static constexpr int kTileKV = kBlockN * kHeadDim;
  static constexpr size_t kSmemBytes = size_t(kTileQ + 4 * kTileKV) * sizeof(__nv_bfloat16);
  // Q's fragments stay in registers for the whole work tile up to D = 128 (kHeadDim / 4 registers); at 256 they
  // would push the thread past 255 registers into local memory, so each key tile reads them from shared memory.
  static constexpr bool kQInRegisters = kHeadDim <= 128;
  static_assert(kBlockM == 16 * kWarps, "each warp owns 16 query rows");
  static_assert(kBlockN % 16 == 0 && kHeadDim % 64 == 0, "tile shape");
};

template <int kBlockM, int kBlockN, int kHeadDim, int kWarps>
using Sm80AttentionTraits = AttentionTraits<kBlockM, kBlockN, kHeadDim, kWarps>;

// Element offset of 16-byte chunk `chunk` of `row` in a [rows][kHeadDim] tile. XOR-ing the chunk with the row's
// low 3 bits puts the 8 rows that one ldmatrix phase reads into 8 different bank groups.
template <int kHeadDim>
__device__ __forceinline__ int swizzle(int row, int chunk) {
  return row * kHeadDim + ((chunk ^ (row & 7)) << 3);
}

// Copies rows [row0, row0 + kRows) of a [S, kHeadDim] slice (token stride `stride`) into a swizzled tile;
// rows at or past seq_len are zero-filled, so padded keys contribute exact zeros to P*V.
template <class Tr, int kRows>
__device__ __forceinline__ void load_tile(__nv_bfloat16* tile, const __nv_bfloat16* src, int64_t stride, int row0,
                                          int seq_len, int tid) {
  constexpr int kChunks = kRows * Tr::kChunksPerRow;
  static_assert(kChunks % Tr::kThreads == 0, "whole chunks per thread");
#pragma unroll
  for (int i = 0; i < kChunks / Tr::kThreads; ++i) {
    const int idx = tid + i * Tr::kThreads;
    const int r = idx / Tr::kChunksPerRow;
    const int c = idx % Tr::kChunksPerRow;
    const int token = row0 + r;
    const bool valid = token < seq_len;
    const __nv_bfloat16* g = src + static_cast<int64_t>(valid ? token : 0) * stride + c * 8;
    device::cp_async_16(device::smem_addr(tile + swizzle<Tr::kHeadDim>(r, c)), g, valid);
  }
}

// The sm80 kernel's epilogue: normalizes the output rows a thread holds and stores them as bf16 ([token, head, dim]
// with p's strides); rows at or past the sequence end are padding and are not written.
template <int kDTiles>
__device__ __forceinline__ void store_output(const float (&acc_o)[kDTiles][4], const SoftmaxSums& softmax,
                                             const AttentionParams& p, int b, int h, int row0, int lane) {
  float inv_l[2];
  softmax.finalize(inv_l);
  __nv_bfloat16* o = p.o + b * p.o_batch_stride + h * p.o_head_stride + 2 * (lane & 3);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + half * 8;
    if (row >= p.seq_len) continue;
    __nv_bfloat16* o_row = o + row * p.o_token_stride;
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
      *reinterpret_cast<uint32_t*>(o_row + dt * 8) =
          device::pack_bf16x2(acc_o[dt][2 * half] * inv_l[half], acc_o[dt][2 * half + 1] * inv_l[half]);
    }
  }
}

// The sm80 kernel (attention_fwd_kernel): one CTA per work tile of Tr::kBlockM query rows. kCached: keys and values
// come from a key/value cache holding each sequence's cached tokens and then the call's new ones
// (AttentionParams::kv_lens); the new queries sit after the cached positions.
template <class Tr, bool kSoftcap, MaskMode kMask, bool kCached = false>
__global__ void __launch_bounds__(Tr::kThreads) attention_fwd_kernel(const AttentionParams p) {
  using bf16 = __nv_bfloat16;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kHeadDim = Tr::kHeadDim;
  constexpr int kNTiles = kBlockN / 8;    // n8 tiles of the score block
  constexpr int kDTiles = kHeadDim / 8;   // n8 tiles of the output block
  constexpr int kKSteps = kHeadDim / 16;  // k16 steps of Q*K^T

  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* s_q = reinterpret_cast<bf16*>(smem_raw);
  bf16* s_k = s_q + Tr::kTileQ;       // two stages
  bf16* s_v = s_k + 2 * Tr::kTileKV;  // two stages

  // Launched programmatically (behind the split projection kernel or the norm/RoPE pass, or in additive mode behind
  // the mask tile lists), everything below reads what the kernels before wrote. A no-op otherwise.
  device::grid_dependency_wait();
  static_assert(!kCached || kMask != MaskMode::kAdditive, "a cache takes causal, sliding-window or no masking");
  const TileCoord tc = tile_coord<kMask, kBlockM, kBlockN, false, kCached>(p, static_cast<int>(blockIdx.x));
  const int b = tc.b, h = tc.h, kvh = tc.kvh, m0 = tc.m0, n_blocks = tc.n_blocks;
  const int seq_len = p.seq_len;  // the queries'
  // The keys' end and the block's first query position (with a cache: shifted by the cached length).
  const int key_len = kCached ? tc.key_len : seq_len, pos0 = kCached ? tc.p0 + m0 : m0;
  // A left-padded sequence's first real key (AttentionParams::kv_starts); keys before it are hidden.
  const int key_start = kCached && p.kv_starts != nullptr ? max(0, min(p.kv_starts[b], key_len)) : 0;

  const bf16* q = p.q + b * p.q_batch_stride + h * p.q_head_stride;
  const bf16* k = p.k + b * p.k_batch_stride + kvh * p.k_head_stride;
  const bf16* v = p.v + b * p.v_batch_stride + kvh * p.v_head_stride;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;

  load_tile<Tr, kBlockM>(s_q, q, p.q_token_stride, m0, seq_len, tid);
  const auto key = [&](int i) { return key_tile<kMask, kBlockN>(tc, i, 0); };
  KeyTile kt = key(0);
  load_tile<Tr, kBlockN>(s_k, k, p.k_token_stride, kt.n0, key_len, tid);
  device::cp_async_commit();
  load_tile<Tr, kBlockN>(s_v, v, p.v_token_stride, kt.n0, key_len, tid);
  device::cp_async_commit();
  if (tid == 0 && p.l2_prefetch_bytes != 0) {  // after this CTA's own first loads
    device::bulk_prefetch_l2_share(p.l2_prefetch, p.l2_prefetch_bytes, blockIdx.x, gridDim.x);
  }

  // Thread (lane) holds rows g and g+8 of its warp's 16, columns 2t and 2t+1 of every n8 tile.
  const int row0 = m0 + warp * 16 + (lane >> 2);
  const int rows[2] = {row0, row0 + 8};
  // The rows' positions among the keys, for the masking (the same as rows without a cache).
  const int key_rows[2] = {pos0 - m0 + row0, pos0 - m0 + row0 + 8};
  RowSoftmax softmax;
  float acc_o[kDTiles][4];
#pragma unroll
  for (int i = 0; i < kDTiles; ++i) acc_o[i][0] = acc_o[i][1] = acc_o[i][2] = acc_o[i][3] = 0.f;
  uint32_t q_frag[Tr::kQInRegisters ? kKSteps : 1][4];

  const bf16* mask_rows = nullptr;
  if constexpr (kMask == MaskMode::kAdditive) mask_rows = p.mask + b * p.mask_batch_stride;

  for (int nb = 0; nb < n_blocks; ++nb) {
    const int stage = nb & 1;
    const bool has_next = nb + 1 < n_blocks;
    const KeyTile next = has_next ? key(nb + 1) : kt;
    device::cp_async_wait<1>();  // K[nb] (and Q) have landed; V[nb] may still be in flight
    __syncthreads();
    if (Tr::kQInRegisters && nb == 0) {
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        const int r = warp * 16 + (lane & 15);
        device::ldmatrix_x4(device::smem_addr(s_q + swizzle<kHeadDim>(r, ks * 2 + (lane >> 4))), q_frag[ks]);
      }
    }
    if (has_next) {
      load_tile<Tr, kBlockN>(s_k + (stage ^ 1) * Tr::kTileKV, k, p.k_token_stride, next.n0, key_len, tid);
      device::cp_async_commit();
    }

    float acc_s[kNTiles][4];
#pragma unroll
    for (int i = 0; i < kNTiles; ++i) acc_s[i][0] = acc_s[i][1] = acc_s[i][2] = acc_s[i][3] = 0.f;
    const bf16* s_kb = s_k + stage * Tr::kTileKV;
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      if constexpr (!Tr::kQInRegisters) {
        const int r = warp * 16 + (lane & 15);
        device::ldmatrix_x4(device::smem_addr(s_q + swizzle<kHeadDim>(r, ks * 2 + (lane >> 4))), q_frag[0]);
      }
      const uint32_t(&qf)[4] = q_frag[Tr::kQInRegisters ? ks : 0];
#pragma unroll
      for (int np = 0; np < kNTiles / 2; ++np) {
        uint32_t kf[4];
        const int key = np * 16 + (lane & 7) + ((lane >> 4) << 3);
        const int chunk = ks * 2 + ((lane >> 3) & 1);
        device::ldmatrix_x4(device::smem_addr(s_kb + swizzle<kHeadDim>(key, chunk)), kf);
        device::mma_bf16_16816(acc_s[2 * np], qf, kf[0], kf[1]);
        device::mma_bf16_16816(acc_s[2 * np + 1], qf, kf[2], kf[3]);
      }
    }

    const int n0 = kt.n0;
    // An edge tile may hold keys the mask policy hides (MaskPolicy::hide): past the sequence end, (causal) right of
    // the block's first row, or (sliding window) `window` or more left of its last row.
    constexpr bool kCausal = MaskPolicy<kMask>::kCausal;
    const bool edge = (n0 + kBlockN > key_len) || (kCausal && n0 + kBlockN - 1 > pos0) ||
                      (MaskPolicy<kMask>::kWindow && pos0 + (kBlockM - 1) - n0 >= p.window);
    if constexpr (kCached) {
      scores_to_logits<kSoftcap, kMask, kNTiles>(acc_s, p, tc.b, mask_rows, key_rows, n0, lane, edge, kt.mask,
                                                 nullptr, false, key_len);
      if (n0 < key_start) hide_before<kNTiles>(acc_s, n0 + 2 * (lane & 3), key_start);
    } else {
      scores_to_logits<kSoftcap, kMask, kNTiles>(acc_s, p, tc.b, mask_rows, rows, n0, lane, edge, kt.mask);
    }
    softmax.update<kNTiles, kDTiles>(acc_s, acc_o, logit_scale<kSoftcap, kMask>(p));

    if (has_next) {
      device::cp_async_wait<1>();
    } else {
      device::cp_async_wait<0>();
    }
    __syncthreads();  // V[nb] visible to all warps
    if (has_next) {
      load_tile<Tr, kBlockN>(s_v + (stage ^ 1) * Tr::kTileKV, v, p.v_token_stride, next.n0, key_len, tid);
      device::cp_async_commit();
    }

    const bf16* s_vb = s_v + stage * Tr::kTileKV;
    uint32_t p_frag[kNTiles / 2][4];
    pack_p(acc_s, p_frag);
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
#pragma unroll
      for (int dp = 0; dp < kDTiles / 2; ++dp) {
        uint32_t vf[4];
        const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
        const int chunk = dp * 2 + (lane >> 4);
        device::ldmatrix_x4_trans(device::smem_addr(s_vb + swizzle<kHeadDim>(key, chunk)), vf);
        device::mma_bf16_16816(acc_o[2 * dp], p_frag[kk], vf[0], vf[1]);
        device::mma_bf16_16816(acc_o[2 * dp + 1], p_frag[kk], vf[2], vf[3]);
      }
    }
    kt = next;
  }

  store_output(acc_o, softmax, p, b, h, row0, lane);
}

}  // namespace gk::gemma3
