// A hand-off of data between the CTAs of one grid without a kernel boundary: some CTAs (writers) produce data that
// others read, counting on two words of device memory that are zero between launches (the handle's SyncWords) and
// that every launch leaves at zero, so nothing clears them per call and CUDA-graph replays find them clear.
//
//  - A writer stores its share, then counts it on w[0] with a release (one thread, after a CTA-level barrier that
//    orders every thread's stores before it: the release is cumulative).
//  - A reader polls w[0] until every writer has counted, then acquires. The wait is bounded: nothing guarantees
//    that the grid's CTAs are resident at once (another context, MPS limits), and a CTA must never wait forever
//    for one that cannot start; past the bound the reader produces the data itself (the same values) and goes on.
//  - Every CTA, writer or reader or both, counts itself out on w[1] once it will not read w[0] again and (if a
//    writer) its own count is in. The arrival that completes w[1] resets both words: every writer has counted and
//    nobody reads w[0] any more.
// Two launches must not use one pair of words at once (a handle serves one call at a time).
#pragma once

#include <cstdint>

namespace gk::device {

struct GridHandoff {
  unsigned* words;   // [2]
  unsigned writers;  // CTAs that count on words[0]
  unsigned ctas;     // every CTA of the grid: all count out on words[1]
};

namespace handoff_detail {

__device__ __forceinline__ unsigned ld_relaxed(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

}  // namespace handoff_detail

// A writer's count (one thread, after the barrier that orders its CTA's stores of the share).
__device__ __forceinline__ void handoff_count(const GridHandoff& h) {
  asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(h.words) : "memory");
}

// A reader's wait for every writer's count (one thread). True: counted and acquired; false: `wait_ns` passed
// first (0: at once, for tests) and the caller must produce the data itself.
__device__ __forceinline__ bool handoff_wait(const GridHandoff& h, unsigned long long wait_ns) {
  const unsigned long long t0 = handoff_detail::now_ns();
  while (wait_ns > 0) {
    if (handoff_detail::ld_relaxed(h.words) >= h.writers) {
      asm volatile("fence.acq_rel.gpu;\n" ::: "memory");  // with the relaxed read: acquires every writer's release
      return true;
    }
    if (handoff_detail::now_ns() - t0 > wait_ns) break;
    __nanosleep(64);
  }
  return false;
}

// Every CTA once (one thread): after its last read of words[0] and, for a writer, after its own count.
__device__ __forceinline__ void handoff_leave(const GridHandoff& h) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(old) : "l"(h.words + 1) : "memory");
  if (old == h.ctas - 1) {
    *reinterpret_cast<volatile unsigned*>(h.words) = 0;
    *reinterpret_cast<volatile unsigned*>(h.words + 1) = 0;
  }
}

}  // namespace gk::device
