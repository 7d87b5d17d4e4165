// A hand-off of data between the CTAs of one launch without a kernel boundary. Each writer CTA i, once its share is
// stored, marks slot i of an array in the caller's workspace with the call's epoch: a release by one thread after
// the CTA-level barrier that orders its threads' stores (the release is cumulative). A reader polls the slots it
// needs until they carry the epoch, then acquires.
//
// Nothing is cleared per call: a slot from an earlier call holds another epoch (a 64-bit counter from a random start
// per handle) and reads as not ready, so garbage matches only by chance. Nothing is shared between calls either:
// calls that may run at once use distinct workspaces, as they must for the data itself. But a CUDA graph replays one
// epoch, and a replay would find the previous replay's marks: launches under stream capture must not use this (the
// launchers fall back to a kernel boundary there).
//
// Nothing guarantees that a grid's CTAs are resident at once (another context, MPS limits), and a CTA must never
// wait forever for one that cannot start: the wait is bounded, and past the bound the reader produces the data
// itself (the same values) and goes on.
#pragma once

#include <cstdint>

namespace gk::device {

struct EpochSlots {
  unsigned long long* slots;  // [n]
  unsigned long long epoch;
  unsigned n;
};

// 64-bit global words between the CTAs of a grid, at GPU scope (also stream-K's state words,
// head_gemm/stream_k.cuh).
__device__ __forceinline__ unsigned long long ld_relaxed_gpu(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long ld_acquire_gpu(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_gpu(unsigned long long* p, unsigned long long v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

// Writer CTA i's mark (one thread, after the barrier that orders its CTA's stores of the share).
__device__ __forceinline__ void slot_mark(const EpochSlots& s, unsigned i) { st_release_gpu(s.slots + i, s.epoch); }

// Whether writer i's mark is in (relaxed: follow a true answer with acquire_marks before reading the share).
__device__ __forceinline__ bool slot_ready(const EpochSlots& s, unsigned i) {
  return ld_relaxed_gpu(s.slots + i) == s.epoch;
}

// With the relaxed reads that saw the marks: acquires every writer's release.
__device__ __forceinline__ void acquire_marks() { asm volatile("fence.acq_rel.gpu;\n" ::: "memory"); }

}  // namespace gk::device
