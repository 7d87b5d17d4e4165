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
// A CTA must never wait for one that is not running. The grid is sized to the clusters that can be resident, but
// nothing guarantees they are (another context, MPS limits), so the wait is bounded: past `wait_ns` the TMA thread
// rounds all the weights itself (the same values other CTAs write or wrote, so the overlap is harmless) and goes
// on. Slow, never stuck.
//
// The two counters live in device memory that the handle zeroes once, and every launch leaves them at zero:
// sync[0] counts slices done; sync[1] counts CTAs whose TMA thread will not read sync[0] again (after its wait, or
// at its end if it had none), each arriving only after its own slice is counted. The arrival that completes
// sync[1] resets both: every slice has been counted and nobody reads sync[0] any more. A replayed CUDA graph finds
// them at zero too. Two launches must not run at once on one set of counters (a handle serves one call at a time).
#pragma once

#include <cstdint>

#include "common/device/sm80_primitives.cuh"
#include "common/device/sm90_primitives.cuh"

namespace gk::head_gemm {

struct WeightPrep {
  const uint4* src;  // the caller's weights of segment `seg`
  uint4* dst;        // their rounded copy, which the segment's tensor map reads
  long long vec;     // 16-byte elements
  unsigned* sync;    // [2], zero between launches
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

__device__ __forceinline__ unsigned ld_relaxed(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void add_release(unsigned* p) {
  asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(p) : "memory");
}
__device__ __forceinline__ unsigned add_acq_rel(unsigned* p) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(old) : "l"(p) : "memory");
  return old;
}
__device__ __forceinline__ void fence_acq_rel() { asm volatile("fence.acq_rel.gpu;\n" ::: "memory"); }
__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint4 rounded(uint4 v) {
  uint32_t x[4] = {v.x, v.y, v.z, v.w};
  device::round_tf32_for_mma(x);
  return make_uint4(x[0], x[1], x[2], x[3]);
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
    prep_detail::add_release(p.sync);
    device::mbar_arrive(s.done);
  }
}

// The TMA thread's arrival on sync[1], once it will not read sync[0] again and its own slice is counted.
__device__ __forceinline__ void prep_leave(const WeightPrep& p, const PrepSmem& s, int ctas) {
  device::mbar_wait(s.done, 0);
  if (prep_detail::add_acq_rel(p.sync + 1) == static_cast<unsigned>(ctas) - 1) {
    *reinterpret_cast<volatile unsigned*>(p.sync) = 0;
    *reinterpret_cast<volatile unsigned*>(p.sync + 1) = 0;
  }
}

// The TMA thread, before its first load of the prepared segment: every slice rounded and visible to its TMA loads.
__device__ __forceinline__ void prep_wait_all(const WeightPrep& p, const PrepSmem& s, int ctas) {
  const unsigned long long t0 = prep_detail::now_ns();
  bool all = false;
  while (p.wait_ns > 0) {  // 0: straight to the fallback (tests)
    if (prep_detail::ld_relaxed(p.sync) >= static_cast<unsigned>(ctas)) {
      all = true;
      break;
    }
    if (prep_detail::now_ns() - t0 > p.wait_ns) break;
    __nanosleep(64);
  }
  if (all) {
    prep_detail::fence_acq_rel();  // with the relaxed read of the count: acquires every slice's release
  } else {
    // One thread for the lot, one load in flight (more spill in the producer's 40 registers): a few hundred ms
    // for 4 MB, but only where the other CTAs did not all run at once.
    for (long long i = 0; i < p.vec; ++i) p.dst[i] = prep_detail::rounded(p.src[i]);
  }
  prep_leave(p, s, ctas);
  device::fence_proxy_async_global();  // the generic stores (any CTA's) before this thread's TMA reads of them
}

}  // namespace gk::head_gemm
