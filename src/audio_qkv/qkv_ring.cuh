// The shared-memory ring both fused audio QKV kernels (tf32 and 3xTF32) run on: kStages stages of kStageBytes
// from a 1024-byte aligned base (128-byte swizzle atoms), each holding one K-block's activation tile and,
// kTileBytes further, its weight tile as TMA lands them (3xTF32 with the activations' parts made by a pass: also
// their small tile, 2 kTileBytes in); then three mbarriers per stage: full (TMA landed) and empty (consumed), the
// device::Pipeline, and between them ready (prepared for the tensor cores: rounded in place, or made into big and
// small tf32 parts), published by the warps that prepare a landed stage.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "common/device/pipeline.cuh"
#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"

namespace gk::audio {

template <class Tr>
struct QkvRing {
  uint32_t base, bar;
  device::Pipeline<Tr::kStages> pipe;  // full barriers from bar, empty ones after the ready ones

  __device__ explicit QkvRing(const unsigned char* smem_raw)
      : base(device::smem_base_1024(smem_raw)),
        bar(base + Tr::kStages * Tr::kStageBytes),
        pipe{bar, bar + 8u * 2 * Tr::kStages} {}

  __device__ uint32_t stage(int s) const { return base + s * Tr::kStageBytes; }
  __device__ uint32_t ready(int s) const { return bar + 8u * (Tr::kStages + s); }
  // Waits until use `count`'s stage is prepared (the ready barrier's phase runs with the full one's).
  __device__ __forceinline__ void ready_wait(int count) const {
    device::mbar_wait(ready(pipe.stage(count)), pipe.parity(count));
  }

  // One thread; the caller syncs the CTA before any use.
  __device__ void init(int ready_arrivals) const {
    for (int s = 0; s < Tr::kStages; ++s) {
      device::mbar_init(pipe.full(s), 1);
      device::mbar_init(ready(s), ready_arrivals);
      device::mbar_init(pipe.empty(s), Tr::kConsumerWarps);
    }
    device::mbar_fence_init();
  }

  // The TMA warp's loop (one lane): K-blocks kb0 .. kb0 + k_blocks - 1 of the activation rows from m0 and of the
  // weight rows from n0, each into the next stage as soon as its previous use is consumed. a_small_row >= 0: the
  // activations arrive as 3xTF32 parts (a_map holds the big parts, then from row a_small_row the small parts), and
  // the small tile lands where the kernel's part warps would put it (kRawBytes past the big one).
  __device__ void load(const CUtensorMap* a_map, const CUtensorMap* w_map, int kb0, int k_blocks, int m0, int n0,
                       int a_small_row = -1) const {
    device::tma_prefetch_descriptor(a_map);
    device::tma_prefetch_descriptor(w_map);
    for (int i = 0; i < k_blocks; ++i) {
      const int s = pipe.stage(i);
      const int col = (kb0 + i) * Tr::kBK;
      const uint32_t full = pipe.producer_acquire(i, (a_small_row >= 0 ? 3 : 2) * Tr::kTileBytes);
      device::tma_load_2d(stage(s), a_map, full, col, m0);
      device::tma_load_2d(stage(s) + Tr::kTileBytes, w_map, full, col, n0);
      if (a_small_row >= 0) device::tma_load_2d(stage(s) + 2 * Tr::kTileBytes, a_map, full, col, a_small_row + m0);
    }
  }
};

}  // namespace gk::audio
