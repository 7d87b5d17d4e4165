// The Hopper attention kernel's epilogue: a consumer warpgroup's output rows, normalized and rounded to bf16, go
// through shared memory. Written straight from the accumulator layout, each quad would cover only 16 bytes of a
// row per store and leave half of every 32-byte sector unused (docs/perf-log.md). The staging buffer holds boxes of
// 64 rows x 64 columns (128 bytes a row) in the TMA's 128-byte swizzle (16-byte chunk c of row r at chunk
// c ^ (r % 8)), which also keeps the fragment writes and the row reads free of bank conflicts. An ordinary tile
// then leaves as one TMA store per box issued by one thread, so the warpgroup goes on to its next tile instead of
// issuing loads and stores in every thread; a packed GQA tail (rows of several heads), or an output whose heads
// are not contiguous rows, leaves by 16-byte stores (direct). Named barrier 3 + half guards the buffer: its first
// wait also covers the previous tile's reads (the issuing thread waits for its bulk stores to have read the buffer
// before arriving). At D = 256 there is room for one buffer, which the two warpgroups take in turn (the first half
// first, as their tensor-core turns go): the out-free barrier completes when a warpgroup's stores have read it.
// Stored from registers instead, every 16-byte store waited in the memory system while all CTAs of a window's equal
// work tiles stored at once (docs/perf-log.md v42).
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
  // staged_chunk's layout: a warpgroup's 64 rows, in boxes of 64 columns (2 at D = 128, 4 at D = 256).
  static_assert(kRows == 64 && Tr::kBoxCols * 2 == 128 && Tr::kBoxes * device::kStagedBoxBytes == Tr::kOutBytes,
                "staged_chunk's layout: 64 rows in boxes of 64 columns");
  static_assert(Tr::kOutStages == 2 || Tr::kOutStages == 1, "a buffer per warpgroup, or one taken in turn");
  static_assert(Tr::kOutStages == 1 || Tr::kDTiles == 16, "device::staged_write_head stages 128 columns");

  // The rows of warpgroup `half` (t: the thread's index in it) of the CTA's work tile `local`, normalized by the
  // softmax's sums, to `stage` (its staging buffer) and out. `out_free`: the shared buffer's barrier (kOutStages 1).
  __device__ __forceinline__ static void store(const float (&acc_o)[Tr::kDTiles][4], const SoftmaxSums& softmax,
                                               const AttentionParams& p, const TileCoord& tc,
                                               const CUtensorMap* out_map, bool o_tma, uint32_t stage,
                                               uint32_t out_free, int local, int half) {
    const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32, g = lane >> 2, q = lane & 3;
    float inv_l[2];
    softmax.finalize(inv_l);
    const auto pair = [&](int dt, int hh) {
      return device::pack_bf16x2(acc_o[dt][2 * hh] * inv_l[hh], acc_o[dt][2 * hh + 1] * inv_l[hh]);
    };
    const bool tma = o_tma && tc.tail_rows == 0;
    if constexpr (Tr::kOutStages == 1) {
      // Use 2 local + half of the shared buffer waits for the previous use's release.
      const int use = 2 * local + half;
      if (use > 0) device::mbar_wait(out_free, uint32_t(use - 1) & 1u);
      device::staged_write_rows<Tr::kDTiles>(stage, warp * 16 + g, q, pair);
      if (tma) {
        store_tma(out_map, tc, stage, half, t);
        // Only thread 0 waits for its stores to have read the buffer; the warpgroup's other warps cannot reach
        // their next wait on out_free before it arrives, because the next tile's first turn (take_turn, a barrier
        // of both warpgroups) needs warp 0. A mainloop without that barrier would need one here.
        if (t == 0) {
          device::bulk_wait_read();  // the stores have read the buffer
          device::mbar_arrive(out_free);
        }
      } else {
        store_direct(p, tc, stage, half, t);
        device::named_barrier_sync(3 + half, 128);  // every thread's reads of the buffer done
        if (t == 0) device::mbar_arrive(out_free);
      }
    } else {
      device::staged_write_head(stage, 3 + half, warp * 16 + g, q, pair);
      if (tma) {
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
