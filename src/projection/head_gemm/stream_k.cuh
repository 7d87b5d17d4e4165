// Stream-K for the persistent head-tiled GEMM (head_gemm_sm90.cuh): where the last round of whole units would
// leave many clusters idle (stream_k_plan.hpp), the last round and a bit are not dealt as whole units: the
// clusters take equal runs of those units' K-blocks laid end to end (e.g. 96 units on 66 clusters are 1.45 rounds of
// work, not 2). The rounds before stay whole units round-robin: stream-K over every unit loses at larger M, as its
// clusters work on units far apart at once where round-robin keeps them on neighbours (docs/perf-log.md v13).
//
// A run may start or end inside a unit, but never both (the launcher's plan), so a unit is cut at most once, at the
// start of some cluster c's run, and its two parts belong to cluster c - 1 (the head of the unit, the last thing
// c - 1 does) and cluster c (the tail, the first thing c does). The cut is "boundary" c. Each CTA meets its counterpart
// (same rank) of the other cluster there:
//  - The first to arrive parks its fp32 partial tile in the workspace and marks it ready. It never waits.
//  - The second waits until the partial is ready (its writer has arrived, so it is running and about to finish),
//    adds it and runs the epilogue on the whole sum: the norm needs every K-block.
// One 64-bit word per (boundary, rank) holds the state (0: nobody arrived, 1: the first is parking, 2: parked) under
// a tag of the call's epoch: a word whose tag is not this launch's epoch reads as state 0, so the workspace needs no
// clearing (what it holds from elsewhere matches a 56-bit epoch by chance only), and the finisher puts the word
// back to state 0 under the same tag, so a replayed CUDA graph (same epoch) finds it clear too.
#pragma once

#include <cstdint>

#include "common/device/grid_handoff.cuh"

namespace gk::head_gemm {

// One contiguous piece of a unit's K loop: K-blocks [kb0, kb1) of unit `unit`.
struct Work {
  int unit, kb0, kb1;
};

// The pieces a cluster walks, in order: whole units round-robin up to unit sk_unit0, then (sk_run > 0) its
// stream-K run over the K-blocks of units sk_unit0 .. units - 1 (K-block indices from sk_unit0's first).
struct WorkWalk {
  int unit, dp_stop, step, k_blocks;
  int64_t next, stop;  // the stream-K run, in K-blocks

  __device__ WorkWalk(int units, int k_blocks_, int sk_unit0, int sk_run, int cluster, int clusters)
      : unit(cluster), dp_stop(sk_run > 0 ? sk_unit0 : units), step(clusters), k_blocks(k_blocks_) {
    next = stop = 0;
    if (sk_run > 0) {
      const int64_t base = int64_t(sk_unit0) * k_blocks, total = int64_t(units) * k_blocks;
      next = min(base + int64_t(cluster) * sk_run, total);
      stop = min(next + sk_run, total);
    }
  }

  __device__ bool get(Work& w) {
    if (unit < dp_stop) {
      w = Work{unit, 0, k_blocks};
      unit += step;
      return true;
    }
    if (next >= stop) return false;
    w.unit = static_cast<int>(next / k_blocks);
    w.kb0 = static_cast<int>(next % k_blocks);
    w.kb1 = static_cast<int>(min(int64_t(k_blocks), w.kb0 + (stop - next)));
    next += w.kb1 - w.kb0;
    return true;
  }
};

struct StreamK {
  unsigned long long* flags;  // [boundaries][2 ranks]
  float* partials;            // [boundaries][2 ranks][128 x 256]
  unsigned long long epoch;   // < 2^56
};

// Called by all 256 consumer threads (ct = 0..255) of a CTA after the K loop of a piece that is not a whole unit
// (kb0 > 0: the tail of a unit cut at this cluster's start; else the head of one cut at the next cluster's).
// Returns whether this CTA holds the finished sum in acc and must run the epilogue. kBarrier: a named barrier id
// the consumers may use.
template <int kBarrier>
__device__ __forceinline__ bool stream_k_meet(float (&acc)[32][4], const StreamK& sk, const Work& w, int cluster,
                                              int rank, int ct) {
  const int boundary = w.kb0 > 0 ? cluster : cluster + 1;  // 1 .. clusters - 1
  const int slot = 2 * (boundary - 1) + rank;
  unsigned long long* flag = sk.flags + slot;
  const unsigned long long tag = sk.epoch << 8;
  __shared__ int first;
  if (ct == 0) {
    bool am_first = false;
    for (;;) {
      const unsigned long long v = *reinterpret_cast<volatile unsigned long long*>(flag);
      if ((v >> 8) == sk.epoch && (v & 0xff) != 0) break;  // the other CTA got here first
      if (atomicCAS(flag, v, tag | 1) == v) {
        am_first = true;
        break;
      }
    }
    if (!am_first) {
      while ((device::ld_acquire_gpu(flag) & 0xff) != 2) __nanosleep(64);
    }
    first = am_first;
  }
  device::named_barrier_sync(kBarrier, 256);
  const bool am_first = first;
  device::named_barrier_sync(kBarrier, 256);  // read by all before thread 0 may write it again at the next meet
  float4* part = reinterpret_cast<float4*>(sk.partials) + int64_t(slot) * (32 * 256);
  if (am_first) {
#pragma unroll
    for (int j = 0; j < 32; ++j) part[j * 256 + ct] = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
    // Every thread's stores before the barrier, and the release (cumulative) orders them all before the mark.
    device::named_barrier_sync(kBarrier, 256);
    if (ct == 0) device::st_release_gpu(flag, tag | 2);
    return false;
  }
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const float4 p = __ldcg(part + j * 256 + ct);  // from L2: this SM's L1 may hold the slot from another call
    acc[j][0] += p.x;
    acc[j][1] += p.y;
    acc[j][2] += p.z;
    acc[j][3] += p.w;
  }
  if (ct == 0) *flag = tag;  // state 0 for a replay under the same epoch; nobody else touches it in this launch
  return true;
}

}  // namespace gk::head_gemm
