// The shared-memory ring both fused audio QKV kernels (tf32 and 3xTF32) run on: kStages stages of kStageBytes
// from a 1024-byte aligned base (128-byte swizzle atoms), each holding one K-block's activation tile and,
// kTileBytes further, its weight tile as TMA lands them (3xTF32 with split activations: also the activations' small
// tile, 2 kTileBytes in); then three mbarriers per stage: full (TMA landed), ready
// (prepared for the tensor cores: rounded in place, or split into big and small parts), empty (consumed).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"

namespace gk::audio {

template <class Tr>
struct QkvRing {
  uint32_t base, bar;

  __device__ explicit QkvRing(const unsigned char* smem_raw)
      : base(device::smem_base_1024(smem_raw)), bar(base + Tr::kStages * Tr::kStageBytes) {}

  __device__ uint32_t stage(int s) const { return base + s * Tr::kStageBytes; }
  __device__ uint32_t full(int s) const { return bar + 8u * s; }
  __device__ uint32_t ready(int s) const { return bar + 8u * (Tr::kStages + s); }
  __device__ uint32_t empty(int s) const { return bar + 8u * (2 * Tr::kStages + s); }

  // One thread; the caller syncs the CTA before any use.
  __device__ void init(int ready_arrivals) const {
    for (int s = 0; s < Tr::kStages; ++s) {
      device::mbar_init(full(s), 1);
      device::mbar_init(ready(s), ready_arrivals);
      device::mbar_init(empty(s), Tr::kConsumerWarps);
    }
    device::mbar_fence_init();
  }

  // The TMA warp's loop (one lane): K-blocks kb0 .. kb0 + k_blocks - 1 of the activation rows from m0 and of the
  // weight rows from n0, each into the next stage as soon as its previous use is consumed. a_small_row >= 0: the
  // activations arrive split for 3xTF32 (a_map holds the big parts, then from row a_small_row the small parts),
  // and the small tile lands where the split would put it (kRawBytes past the big one).
  __device__ void load(const CUtensorMap* a_map, const CUtensorMap* w_map, int kb0, int k_blocks, int m0, int n0,
                       int a_small_row = -1) const {
    device::tma_prefetch_descriptor(a_map);
    device::tma_prefetch_descriptor(w_map);
    for (int i = 0; i < k_blocks; ++i) {
      const int s = i % Tr::kStages, round = i / Tr::kStages;
      const int col = (kb0 + i) * Tr::kBK;
      if (round > 0) device::mbar_wait(empty(s), (round - 1) & 1);
      device::mbar_arrive_expect_tx(full(s), (a_small_row >= 0 ? 3 : 2) * Tr::kTileBytes);
      device::tma_load_2d(stage(s), a_map, full(s), col, m0);
      device::tma_load_2d(stage(s) + Tr::kTileBytes, w_map, full(s), col, n0);
      if (a_small_row >= 0) device::tma_load_2d(stage(s) + 2 * Tr::kTileBytes, a_map, full(s), col, a_small_row + m0);
    }
  }
};

}  // namespace gk::audio
