// The Hopper attention kernel's shape (Sm90AttentionTraits), its shared-memory map and barriers (Sm90Smem), and the
// column layout of the packed q|k|v rows it reads (Sm90Columns). Every size the kernel's parts use comes from here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/device/pipeline.cuh"
#include "common/device/sm90_primitives.cuh"
#include "attention/tile_scheduler.cuh"

namespace gk::gemma3 {

// kBlockM query rows per work tile, kBlockN keys per key tile, heads of kHeadDim. Q, K and V tiles arrive by TMA
// in boxes of kBoxCols columns (128 bytes: one 128-byte swizzle row) x kBoxRows (= kBlockN) rows: a K or V tile is
// kBoxes boxes side by side, a Q tile kBoxes column boxes of kBlockM rows, each loaded as kBlockM / kBoxRows boxes.
// Two shapes: D = 128 with 128-key tiles, and D = 256 with 64-key tiles (the 64 x 256 fp32 output accumulator takes
// 128 registers a thread, so the scores get 32; and the Q tile and two K/V stages take 192 KB, which leaves room for
// one warpgroup's output staging buffer, not two: at D = 256 the two consumer warpgroups take turns with one,
// Sm90Epilogue).
template <int kHeadDim_, int kBlockM_ = 128, int kBlockN_ = 128>
struct Sm90AttentionTraits {
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kStages = 2;                    // K/V ring depth
  static constexpr int kConsumerRows = 64;             // a warpgroup's wgmma M
  static constexpr int kConsumerWarpgroups = kBlockM / kConsumerRows;
  static constexpr int kConsumerWarps = 4 * kConsumerWarpgroups;
  static constexpr int kThreads = 128 * (1 + kConsumerWarpgroups);  // the producer warpgroup first
  static constexpr int kBoxCols = 64;
  static constexpr int kBoxRows = kBlockN;
  static constexpr int kBoxes = kHeadDim / kBoxCols;   // column boxes side by side in a Q, K or V tile
  static constexpr int kBoxRowBytes = kBoxCols * 2;
  static constexpr uint32_t kBoxBytes = kBoxCols * kBoxRows * 2;      // one K or V column box (one TMA box)
  static constexpr uint32_t kTileBytes = kBoxes * kBoxBytes;          // a K or V tile
  static constexpr uint32_t kQBoxBytes = kBoxCols * kBlockM * 2;      // one Q column box (kBlockM rows)
  static constexpr uint32_t kQTileBytes = kBoxes * kQBoxBytes;
  // Q full, Q empty; K, V full; K, V empty; the shared output staging buffer free (used where kOutStages == 1).
  static constexpr int kNumBarriers = 3 + 4 * kStages;
  // The output leaves through shared-memory staging (TMA or 16-byte stores): a buffer per consumer warpgroup at
  // D = 128, one that they take in turn at D = 256.
  static constexpr int kOutStages = kHeadDim == 128 ? 2 : 1;
  static constexpr uint32_t kOutBytes = kConsumerRows * kHeadDim * 2;  // one staging buffer
  static constexpr size_t kSmemBytes = 1024 + size_t(kQTileBytes) + size_t(kTileBytes) * 2 * kStages +
                                       kOutStages * size_t(kOutBytes) + 2 * kTileSlotBytes + 8 * kNumBarriers;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static constexpr int kNTiles = kBlockN / 8;   // n8 tiles of scores
  static constexpr int kDTiles = kHeadDim / 8;  // n8 tiles of output
  static constexpr int kKSteps = kHeadDim / 16;  // k16 steps of Q K^T

  static_assert(kHeadDim % kBoxCols == 0, "a head is whole column boxes");
  static_assert(kBlockM == 2 * kConsumerRows, "two consumer warpgroups, ping-pong (named barriers 1 and 2)");
  static_assert(kBlockM % kBoxRows == 0, "a Q column box is whole K/V boxes high (one tensor map for all three)");
  // Register budget of the 240 consumer registers: fp32 S (kBlockN / 2 a thread), fp32 O (kHeadDim / 2) and P
  // (kBlockN / 4). The wgmma issued: Q K^T m64nBlockNk16, P V m64n128k16 per 128 output columns.
  static_assert((kHeadDim == 128 && kBlockN == 128) || (kHeadDim == 256 && kBlockN == 64),
                "instantiated and register-budgeted at D = 128 with 128-key tiles and D = 256 with 64-key tiles");
  static_assert(kSmemBytes <= 227 * 1024, "the opt-in shared-memory limit");
};

using Sm90Traits = Sm90AttentionTraits<128>;
using Sm90Traits256 = Sm90AttentionTraits<256, 128, 64>;

// Column offsets (elements) of the K and V heads inside the packed q|k|v rows the tensor map covers.
struct Sm90Columns {
  int k_col;
  int v_col;
  bool o_tma;  // the output's heads are contiguous rows of kHeadDim: whole tiles leave by TMA stores (out_map)
  // The cached form only: q is [B][Hq][S][D] (gemma3_attend's query) and its map [B * Hq][S][D], not the packed rows.
  bool q_heads_z;
};

// The shared-memory map: Q, the K and V rings, the output staging buffers, two decoded-tile slots, the mbarriers.
// Barriers: Q full, Q empty, then K full[kStages], V full[kStages], K empty[kStages], V empty[kStages], out free.
template <class Tr>
struct Sm90Smem {
  uint32_t q, k, v, o, slots, bar;
  device::Pipeline<1> q_pipe;  // the Q tile: one stage, its use count the work tile's local index
  device::Pipeline<Tr::kStages> k_pipe, v_pipe;

  __device__ __forceinline__ explicit Sm90Smem(uint32_t base)
      : q(base),
        k(q + Tr::kQTileBytes),                // kStages tiles
        v(k + Tr::kStages * Tr::kTileBytes),   // kStages tiles
        o(v + Tr::kStages * Tr::kTileBytes),   // kOutStages output staging buffers
        slots(o + Tr::kOutStages * Tr::kOutBytes),  // 2 decoded work tiles (16-byte aligned)
        bar(slots + 2 * kTileSlotBytes),       // 8-byte mbarriers
        q_pipe{bar, bar + 8u},
        k_pipe{bar + 8u * 2, bar + 8u * (2 + 2 * Tr::kStages)},
        v_pipe{bar + 8u * (2 + Tr::kStages), bar + 8u * (2 + 3 * Tr::kStages)} {}

  // The producer's decoded tile for the consumers' work tile `local`, in slot local % 2.
  __device__ __forceinline__ uint32_t tile_slot(int local) const { return slots + kTileSlotBytes * (local & 1); }
  // Consumer warpgroup `half`'s output staging buffer.
  __device__ __forceinline__ uint32_t out_stage(int half) const {
    return o + (Tr::kOutStages > 1 ? half : 0) * Tr::kOutBytes;
  }
  // Completes each time a warpgroup is done with the shared staging buffer (kOutStages == 1).
  __device__ __forceinline__ uint32_t out_free() const { return bar + 8u * (2 + 4 * Tr::kStages); }

  // One thread, before the CTA's first barrier sync. The empty barriers expect one arrival per consumer warp.
  __device__ __forceinline__ void init_barriers() const {
    device::mbar_init(q_pipe.full(0), 1);
    device::mbar_init(q_pipe.empty(0), Tr::kConsumerWarps);
    for (int s = 0; s < Tr::kStages; ++s) {
      device::mbar_init(k_pipe.full(s), 1);
      device::mbar_init(v_pipe.full(s), 1);
      device::mbar_init(k_pipe.empty(s), Tr::kConsumerWarps);
      device::mbar_init(v_pipe.empty(s), Tr::kConsumerWarps);
    }
    device::mbar_init(out_free(), 1);
    device::mbar_fence_init();
  }
};

}  // namespace gk::gemma3
