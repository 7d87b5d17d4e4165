// The persistent head-tiled GEMM's own weight preparation (tf32): one segment's weights (the audio operator's v)
// rounded to nearest tf32 into the workspace by the producer warpgroup's three idle warps while the first round of
// units runs. It replaces a pass before the kernel, which held the SMs before the GEMM's first CTA could start (a
// GEMM CTA takes a whole SM's registers, so none can sit beside the pass's blocks; docs/perf-log.md v14).
//
// Each CTA rounds an even share (a slice) of the weights: 16 KB bulk copies bring it into shared memory, the 96
// threads round it (device::round_tf32_for_mma: the bits the pass wrote) and store it with plain stores. The unit
// order (unit_order.hpp) keeps that segment's tiles out of the first round; before loading the first of them, a
// CTA's TMA thread waits until every slice is in.
//
// The slices are handed over through device/grid_handoff.cuh: each CTA marks its slot with the call's epoch, and the
// same 96 threads then wait until every slot is marked, bounded: past `wait_ns` they round all the weights
// themselves (the same values other CTAs write or wrote, so the overlap is harmless) and go on. Either way they
// release the CTA's TMA thread through a shared-memory barrier. The slots are epoch-tagged, so a launch under stream
// capture (replayed with one epoch) rounds in a pass before the kernel instead (the launcher's choice).
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
  device::EpochSlots slots;  // one per CTA
  int seg;                   // -1: no preparation
  unsigned long long wait_ns;  // 0: every CTA takes the fallback (tests)
};

// Shared memory of the preparation: two chunk buffers, their barriers and the barrier that releases the TMA thread.
struct PrepSmem {
  static constexpr int kChunk = 1024;  // 16-byte elements per bulk copy: 16 KB
  static constexpr uint32_t kBytes = 2 * kChunk * 16;
  static constexpr int kThreads = 96;  // the producer warpgroup's warps 1..3
  static constexpr int kBarrier = 2;   // named barrier id (the consumers use 1)
  uint32_t buf, bar, ready;            // buf: 2 x kChunk x 16 bytes; bar: 2 mbarriers
  __device__ uint32_t buffer(int i) const { return buf + uint32_t(i) * kChunk * 16; }
  __device__ uint32_t barrier(int i) const { return bar + 8u * i; }
};

namespace prep_detail {

// Elements i, i + step, ... < end rounded from src into dst, kInFlight loads in flight before any store (what the
// producer warpgroup's 40 registers hold without spilling).
template <int kInFlight>
__device__ __forceinline__ void round_range(const WeightPrep& p, long long i, long long end, long long step) {
  for (; i < end; i += kInFlight * step) {
    uint4 v[kInFlight];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) v[j] = i + j * step < end ? p.src[i + j * step] : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      if (i + j * step < end) p.dst[i + j * step] = device::round_tf32_for_mma(v[j]);
    }
  }
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
      p.dst[c0 + i] = device::round_tf32_for_mma(device::ld_shared_v4(s.buffer(c % 2) + 16u * i));
    }
    // Every thread is done with the buffer before it is refilled, and (after the last chunk) every store is
    // ordered before the mark's release, which is cumulative.
    device::named_barrier_sync(PrepSmem::kBarrier, PrepSmem::kThreads);
    if (t == 0 && c + 2 < chunks) issue(c + 2);
  }
  if (t == 0) device::slot_mark(p.slots, static_cast<unsigned>(cta));
  // Every slot marked, or the bound passed. Warp 0 of the 96 polls (a lane's slots one load each per round, a
  // quarter of a microsecond apart); the rest wait at the barrier, which also tells everyone whether it timed out.
  bool ok = true;
  if (t < 32 && p.wait_ns > 0) {
    const unsigned long long t0 = device::globaltimer_ns();
    for (unsigned j = static_cast<unsigned>(t); j < p.slots.n && ok; j += 32) {
      while (!device::slot_ready(p.slots, j)) {
        if (device::globaltimer_ns() - t0 > p.wait_ns) {
          ok = false;
          break;
        }
        __nanosleep(256);
      }
    }
    device::acquire_marks();
  } else if (t < 32) {
    ok = false;  // wait_ns 0: straight to the fallback (tests)
  }
  if (!device::named_barrier_and(PrepSmem::kBarrier, PrepSmem::kThreads, ok)) {
    // A CTA that did not run at once with this one: round everything here, 96 threads.
    prep_detail::round_range<4>(p, t, p.vec, PrepSmem::kThreads);
    device::named_barrier_sync(PrepSmem::kBarrier, PrepSmem::kThreads);
  }
  if (t == 0) device::mbar_arrive(s.ready);
}

// The TMA thread, before its first load of the prepared segment: every slice rounded, acquired by the preparation
// threads (ordered before this thread by the barrier), and ordered before this thread's TMA reads of it.
__device__ __forceinline__ void prep_wait_all(const PrepSmem& s) {
  device::mbar_wait(s.ready, 0);
  device::fence_proxy_async_global();
}

}  // namespace gk::head_gemm
