// What a gk_handle_t owns: the device it was created on, the cuBLASLt plans, and a side stream with two events
// for running a memory-bound step beside a compute-bound GEMM within one call.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/device_props.hpp"
#include "common/gemm.hpp"
#include "common/launch_graph.hpp"
#include "common/overrides.hpp"

namespace gk::detail {

// A high-priority stream a call forks work onto and joins back before returning (fork/join through events, so
// it also works under CUDA-graph capture). Used by one call at a time, as the handle is.
class SideStream {
 public:
  SideStream() = default;
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  Status init();
  // Work enqueued on stream() after fork(main) runs after everything enqueued on `main` so far.
  Status fork(const char* op, cudaStream_t main);
  // Everything enqueued on `main` after join(main) runs after everything enqueued on stream() so far.
  Status join(const char* op, cudaStream_t main);
  cudaStream_t stream() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
};

// One call's use of the side stream: fork() as often as needed, join() once at the end. If the call returns early
// (an error between fork and join), the destructor still joins, so the caller's stream stays ordered after
// everything the call enqueued and a capture in progress is not left with an unjoined fork.
class SideScope {
 public:
  SideScope(SideStream& side, const char* op, cudaStream_t main) : side_(side), op_(op), main_(main) {}
  ~SideScope() {
    if (forked_ && !joined_) (void)side_.join(op_, main_);  // the call is already failing: keep its error
  }
  SideScope(const SideScope&) = delete;
  SideScope& operator=(const SideScope&) = delete;

  Status fork() {
    forked_ = true;
    return side_.fork(op_, main_);
  }
  Status join() {
    joined_ = true;
    return side_.join(op_, main_);
  }
  cudaStream_t stream() const { return side_.stream(); }

 private:
  SideStream& side_;
  const char* op_;
  cudaStream_t main_;
  bool forked_ = false, joined_ = false;
};

}  // namespace gk::detail

struct gk_handle_st {
  int device = 0;
  gk::detail::GemmRunner gemm;
  gk::detail::SideStream side;
  gk::detail::LaunchGraphs graphs;  // multi-launch calls as graph launches (launch_graph.hpp)
  gk::detail::DeviceInfo device_info;  // queried at creation: what the planners know of the device
  gk::detail::Overrides overrides;     // pinned planner choices (gk_handle_set_overrides; none at creation)
  // The next call's epoch (a random start at creation; head_gemm's launcher keeps its low 56 bits): tags the
  // cross-CTA state a launch keeps in the caller's workspace, so that what the workspace held before reads as stale
  // (head_gemm/stream_k.cuh).
  std::atomic<uint64_t> epoch{0};  // atomic: a handle guarded by the caller may still move between host threads
  uint64_t next_epoch() { return epoch.fetch_add(1, std::memory_order_relaxed); }
};

namespace gk::detail {
// Fails when the handle is null or the current device is not the handle's.
Status check_handle(const char* op, gk_handle_t handle);
// The per-call preconditions every operator shares: a usable handle and a large enough, aligned workspace.
Status check_call(const char* op, gk_handle_t handle, void* workspace, size_t workspace_bytes, size_t needed);
}  // namespace gk::detail
