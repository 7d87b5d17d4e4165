// The persistent head-tiled GEMM's own weight preparation (tf32): one segment's weights (the audio operator's v)
// rounded to nearest tf32 into the workspace by the producer warpgroup's three idle warps while the first round of
// units runs. It replaces a pass before the kernel, which held the SMs for ~2.4 us before the GEMM's first CTA could
// start (a GEMM CTA takes a whole SM's registers, so none can sit beside the pass's blocks; docs/perf-log.md v14).
//
// Each CTA rounds an even share (a slice) of the weights: 16 KB bulk copies bring it into shared memory, the 96
// threads round it (device::round_tf32_for_mma: the bits the pass wrote) and store it with plain stores, and one of
// them counts the slice done with a release. The unit order (unit_order.hpp) keeps that segment's tiles out of the
// first round; before loading the first of them, a CTA's TMA thread waits until every slice is counted.
//
// A CTA must never wait for one that is not running (the hand-off's wait is bounded): past `wait_ns` the TMA thread
// rounds all the weights itself (the same values other CTAs write or wrote, so the overlap is harmless) and goes
// on. Slow, never stuck.
//
// The slices are handed over through device/grid_handoff.cuh on the handle's two words: every CTA is a writer
// (its slice) and, with tiles of that segment, a reader.
#pragma once

#include <cstdint>

#include "common/device/grid_handoff.cuh"
#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"

namespace gk::head_gemm {

struct WeightPrep {
  const uint4* src;  // the caller's weights of segment `seg`
  uint4* dst;        // their rounded copy, which the segment's tensor map reads
  long long vec;     // 16-byte elements
  unsigned* sync;    // the hand-off's two words
  int seg;           // -1: no preparation
  unsigned long long wait_ns;  // 0: every CTA takes the fallback (tests)
};

// Shared memory of the preparation: two chunk buffers, their barriers and the slice-done barrier.
struct PrepSmem {
  static constexpr int kChunk = 1024;  // 16-byte elements per bulk copy: 16 KB
  static constexpr uint32_t kBytes = 2 * kChunk * 16;
  static constexpr int kThreads = 96;  // the producer warpgroup's warps 1..3
  static constexpr int kBarrier = 2;   // named barrier id (the consumers use 1)
  uint32_t buf, bar, done;             // buf: 2 x kChunk x 16 bytes; bar: 2 mbarriers
  __device__ uint32_t buffer(int i) const { return buf + uint32_t(i) * kChunk * 16; }
  __device__ uint32_t barrier(int i) const { return bar + 8u * i; }
};

namespace prep_detail {

__device__ __forceinline__ uint4 rounded(uint4 v) {
  uint32_t x[4] = {v.x, v.y, v.z, v.w};
  device::round_tf32_for_mma(x);
  return make_uint4(x[0], x[1], x[2], x[3]);
}

// Every CTA writes a slice; all of them count out.
__device__ __forceinline__ device::GridHandoff handoff(const WeightPrep& p, int ctas) {
  return device::GridHandoff{p.sync, static_cast<unsigned>(ctas), static_cast<unsigned>(ctas)};
}

}  // namespace prep_detail

// Run by the 96 preparation threads (t = 0..95) of CTA `cta` of `ctas`, once per launch.
__device__ __forceinline__ void prep_round_slice(const WeightPrep& p, const PrepSmem& s, int t, int cta, int ctas) {
  constexpr int kChunk = PrepSmem::kChunk;
  const long long per = (p.vec + ctas - 1) / ctas;
  const long long lo = min(p.vec, per * cta), hi = min(p.vec, lo + per);
  const int chunks = static_cast<int>((hi - lo + kChunk - 1) / kChunk);
  const auto issue = [&](int c) {
    const long long c0 = lo + static_cast<long long>(c) * kChunk;
    const uint32_t bytes = static_cast<uint32_t>(min(static_cast<long long>(kChunk), hi - c0)) * 16;
    device::mbar_arrive_expect_tx(s.barrier(c % 2), bytes);
    device::bulk_load_1d(s.buffer(c % 2), p.src + c0, bytes, s.barrier(c % 2));
  };
  if (t == 0) {
    for (int c = 0; c < chunks && c < 2; ++c) issue(c);
  }
  for (int c = 0; c < chunks; ++c) {
    device::mbar_wait(s.barrier(c % 2), (c / 2) & 1);
    const long long c0 = lo + static_cast<long long>(c) * kChunk;
    const int n = static_cast<int>(min(static_cast<long long>(kChunk), hi - c0));
    for (int i = t; i < n; i += PrepSmem::kThreads) {
      uint32_t x[4];
      device::ld_shared_v4_u32(s.buffer(c % 2) + 16u * i, x);
      p.dst[c0 + i] = prep_detail::rounded(make_uint4(x[0], x[1], x[2], x[3]));
    }
    // Every thread is done with the buffer before it is refilled, and (after the last chunk) every store is
    // ordered before the count's release, which is cumulative.
    device::named_barrier_sync(PrepSmem::kBarrier, PrepSmem::kThreads);
    if (t == 0 && c + 2 < chunks) issue(c + 2);
  }
  if (t == 0) {
    device::handoff_count(prep_detail::handoff(p, ctas));
    device::mbar_arrive(s.done);
  }
}

// The TMA thread's count-out, once it will not wait again and its own slice is counted.
__device__ __forceinline__ void prep_leave(const WeightPrep& p, const PrepSmem& s, int ctas) {
  device::mbar_wait(s.done, 0);
  device::handoff_leave(prep_detail::handoff(p, ctas));
}

// The TMA thread, before its first load of the prepared segment: every slice rounded and visible to its TMA loads.
__device__ __forceinline__ void prep_wait_all(const WeightPrep& p, const PrepSmem& s, int ctas) {
  if (!device::handoff_wait(prep_detail::handoff(p, ctas), p.wait_ns)) {
    // One thread for the lot, one load in flight (more spill in the producer's 40 registers): a few hundred ms
    // for 4 MB, but only where the other CTAs did not all run at once.
    for (long long i = 0; i < p.vec; ++i) p.dst[i] = prep_detail::rounded(p.src[i]);
  }
  prep_leave(p, s, ctas);
  device::fence_proxy_async_global();  // the generic stores (any CTA's) before this thread's TMA reads of them
}

}  // namespace gk::head_gemm
