// The Hopper attention kernel's epilogue: a consumer warpgroup's output rows, normalized and rounded to bf16, go
// through shared memory. Written straight from the accumulator layout, each quad would cover only 16 bytes of a
// row per store and leave half of every 32-byte sector unused (docs/perf-log.md). The staging buffer holds boxes of
// 64 rows x 64 columns (128 bytes a row) in the TMA's 128-byte swizzle (16-byte chunk c of row r at chunk
// c ^ (r % 8)), which also keeps the fragment writes and the row reads free of bank conflicts. An ordinary tile
// then leaves as one TMA store per box issued by one thread, so the warpgroup goes on to its next tile instead of
// issuing loads and stores in every thread; a packed GQA tail (rows of several heads), or an output whose heads
// are not contiguous rows, leaves by 16-byte stores (direct). Named barrier 3 + half guards the buffer: its first
// wait also covers the previous tile's reads (the issuing thread waits for its bulk stores to have read the buffer
// before arriving). At D = 256 there is no room for the staging buffer: rows leave from registers after a word
// exchange across each quad (store_registers).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"
#include "attention/params.hpp"
#include "attention/sm90_traits.cuh"
#include "attention/softmax.cuh"
#include "attention/tile_scheduler.cuh"

namespace gk::gemma3 {

template <class Tr>
struct Sm90Epilogue {
  static constexpr int kRows = Tr::kConsumerRows;
  static constexpr int kChunks = Tr::kHeadDim / 8;  // 16-byte chunks of an output row
  // device::staged_write_head and staged_chunk stage a warpgroup's 64 rows of a 128-column head.
  static_assert(!Tr::kStagedOutput || (Tr::kDTiles == 16 && kRows == 64 && Tr::kBoxCols * 2 == 128 &&
                                        Tr::kBoxes * device::kStagedBoxBytes == Tr::kOutBytes),
                "the staging layout of device::staged_write_head: 64 rows of 128 columns in 64-column boxes");
  static_assert(Tr::kDTiles % 4 == 0, "register stores: groups of four n8 tiles");

  // The rows of warpgroup `half` (t: the thread's index in it), normalized by the softmax's sums, to `stage` (its
  // staging buffer) and out.
  __device__ __forceinline__ static void store(const float (&acc_o)[Tr::kDTiles][4], const SoftmaxSums& softmax,
                                               const AttentionParams& p, const TileCoord& tc,
                                               const CUtensorMap* out_map, bool o_tma, uint32_t stage, int half) {
    const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32, g = lane >> 2, q = lane & 3;
    float inv_l[2];
    softmax.finalize(inv_l);
    if constexpr (!Tr::kStagedOutput) {
      store_registers(acc_o, inv_l, p, tc, half, warp, lane);
    } else {
      device::staged_write_head(stage, 3 + half, warp * 16 + g, q, [&](int dt, int hh) {
        return device::pack_bf16x2(acc_o[dt][2 * hh] * inv_l[hh], acc_o[dt][2 * hh + 1] * inv_l[hh]);
      });
      if (o_tma && tc.tail_rows == 0) {
        store_tma(out_map, tc, stage, half, t);
        return;
      }
      store_direct(p, tc, stage, half, t);
    }
  }

  // An ordinary tile's rows: one TMA store per box. Rows past the sequence end fall outside the tensor map and are
  // not written.
  __device__ __forceinline__ static void store_tma(const CUtensorMap* out_map, const TileCoord& tc, uint32_t stage,
                                                   int half, int t) {
    device::staged_publish(3 + half);
    if (t == 0) {
      const int col = tc.h * Tr::kHeadDim, row = tc.m0 + half * kRows;
#pragma unroll
      for (int box = 0; box < Tr::kBoxes; ++box) {
        device::tma_store_3d(out_map, stage + box * device::kStagedBoxBytes, col + box * Tr::kBoxCols, row, tc.b);
      }
      device::bulk_commit_group();
    }
  }

  // Without staging (D = 256: no shared memory left for it), 16-byte stores straight from the accumulators. A
  // quad's lanes hold two columns each of the same two rows per n8 tile; over four n8 tiles, a 4 x 4 exchange of
  // 32-bit words across the quad leaves each lane the eight consecutive columns of one of them, so every store is
  // 16 bytes and each quad writes 64 contiguous bytes of a row (whole sectors). Rows as in store_direct.
  __device__ __forceinline__ static void store_registers(const float (&acc_o)[Tr::kDTiles][4], const float (&inv_l)[2],
                                                         const AttentionParams& p, const TileCoord& tc, int half,
                                                         int warp, int lane) {
    const int g = lane >> 2, q = lane & 3;
    const int rows = tc.tail_rows > 0 ? tc.tail_rows * p.group_size : Tr::kBlockM;
    const auto pick = [](const uint32_t (&w)[4], int i) {
      return (i & 2) ? ((i & 1) ? w[3] : w[2]) : ((i & 1) ? w[1] : w[0]);
    };
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int i = half * kRows + warp * 16 + g + 8 * hh;
      int head, pos;
      row_of(tc, i, &head, &pos);
      const bool live = pos < p.seq_len && i < rows;
      __nv_bfloat16* row = p.o + tc.b * p.o_batch_stride + head * p.o_head_stride + int64_t(pos) * p.o_token_stride;
#pragma unroll
      for (int j = 0; j < Tr::kDTiles / 4; ++j) {
        uint32_t w[4], got[4];
#pragma unroll
        for (int d = 0; d < 4; ++d) {
          w[d] = device::pack_bf16x2(acc_o[4 * j + d][2 * hh] * inv_l[hh], acc_o[4 * j + d][2 * hh + 1] * inv_l[hh]);
        }
        // Round r: lane L sends its word for n8 tile 4 j + (L ^ r) to lane L ^ r, so lane q receives the columns
        // 2 (q ^ r), + 1 of n8 tile 4 j + q.
#pragma unroll
        for (int r = 0; r < 4; ++r) got[r] = r == 0 ? pick(w, q) : __shfl_xor_sync(0xffffffffu, pick(w, q ^ r), r);
        const uint4 v = make_uint4(pick(got, q), pick(got, q ^ 1), pick(got, q ^ 2), pick(got, q ^ 3));
        if (live) *reinterpret_cast<uint4*>(row + (4 * j + q) * 8) = v;
      }
    }
  }

  // 16-byte stores from the staging buffer, each thread's rows and chunks in turn. Rows past the sequence end, and
  // a packed tail's rows past its heads' (tail_rows * group_size), are padding.
  __device__ __forceinline__ static void store_direct(const AttentionParams& p, const TileCoord& tc, uint32_t stage,
                                                      int half, int t) {
    static_assert(kRows * kChunks % 128 == 0, "whole chunks per thread");
    device::named_barrier_sync(3 + half, 128);
    __nv_bfloat16* o = p.o + tc.b * p.o_batch_stride;
    const int rows = tc.tail_rows > 0 ? tc.tail_rows * p.group_size : Tr::kBlockM;
#pragma unroll
    for (int i = 0; i < kRows * kChunks / 128; ++i) {
      const int id = i * 128 + t, r = id / kChunks, c = id % kChunks;
      const uint4 v = device::ld_shared_v4(device::staged_chunk(stage, r, c));
      int head, pos;
      row_of(tc, half * kRows + r, &head, &pos);
      if (pos < p.seq_len && half * kRows + r < rows) {
        *reinterpret_cast<uint4*>(o + head * p.o_head_stride + int64_t(pos) * p.o_token_stride + c * 8) = v;
      }
    }
  }
};

}  // namespace gk::gemma3
