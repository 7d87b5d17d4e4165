// The one TMA/mbarrier pipeline of the warp-specialized kernels: kStages shared-memory stages, each with a "full"
// barrier (the producer's TMA bytes have landed) and an "empty" barrier (every consumer has released the stage).
//
// Position in the pipeline is a running count of stage uses, shared by producer and consumers: stage =
// count % kStages and, since each barrier completes one phase per round of the ring, the phase a consumer waits
// for is (count / kStages) & 1, and the producer's wait for the previous round's release is one phase earlier.
// The count runs on across work tiles, so a persistent kernel's ring never drains between tiles.
//
// The barriers' addresses are given, not laid out here, so that a kernel keeps its own shared-memory map (and
// several pipelines, e.g. attention's K and V, can interleave their barriers).
#pragma once

#include <cstdint>

#include "common/device/sm90_gemm_primitives.cuh"
#include "common/device/sm90_primitives.cuh"

namespace gk::device {

template <int kStages_>
struct Pipeline {
  static constexpr int kStages = kStages_;
  uint32_t full0;   // stage 0's full barrier; stage s at full0 + 8 s
  uint32_t empty0;  // stage 0's empty barrier; stage s at empty0 + 8 s

  __device__ static constexpr int stage(int count) { return count % kStages; }
  __device__ static constexpr uint32_t parity(int count) { return uint32_t(count / kStages) & 1u; }
  __device__ uint32_t full(int s) const { return full0 + 8u * s; }
  __device__ uint32_t empty(int s) const { return empty0 + 8u * s; }

  // One thread, before the CTA's first barrier sync: the full barriers expect one arrival (the producer's
  // expect_tx), the empty barriers `consumer_arrivals`. (The caller fences the inits: mbar_fence_init.)
  __device__ void init(uint32_t consumer_arrivals) const {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), consumer_arrivals);
    }
  }

  // Producer: waits until use `count`'s stage is free (its previous round released; the first round is), then
  // arms its full barrier for `bytes` of TMA; returns that barrier for the loads.
  __device__ uint32_t producer_acquire(int count, uint32_t bytes) const {
    const int s = stage(count), round = count / kStages;
    if (round > 0) mbar_wait(empty(s), uint32_t(round - 1) & 1u);
    mbar_arrive_expect_tx(full(s), bytes);
    return full(s);
  }

  // Consumer: waits until use `count`'s bytes have landed.
  __device__ void consumer_wait(int count) const { mbar_wait(full(stage(count)), parity(count)); }
  // Consumer: one arrival on use `count`'s empty barrier (the caller picks which thread arrives).
  __device__ void consumer_release(int count) const { mbar_arrive(empty(stage(count))); }

  // Consumer of a ring shared by two CTAs of a cluster (each producer multicasts into both): one arrival on use
  // `count`'s empty barrier in each CTA, given their stage-0 empty barriers as cluster addresses
  // (cluster_map(empty(0), rank)); the barriers then expect the arrivals of both CTAs' consumers.
  __device__ __forceinline__ static void consumer_release_cluster(int count, uint32_t empty0_rank0,
                                                                  uint32_t empty0_rank1) {
    const uint32_t off = 8u * stage(count);
    mbar_arrive_cluster(empty0_rank0 + off);
    mbar_arrive_cluster(empty0_rank1 + off);
  }
};

}  // namespace gk::device
