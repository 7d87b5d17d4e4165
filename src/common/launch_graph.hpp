// A call's launches (at most LaunchList::kMax, in stream order, each made before any is issued), and how they go
// out: one after another, or as one launch of a CUDA graph the handle keeps per chain of kernels and launch shapes.
// In a graph the kernels follow each other on the device with no host call between them: under an API-tracing
// profiler (NVIDIA's harness) each runtime call costs microseconds, and a short first kernel (a pass) would leave
// the GPU idle while the host issues the next. The graph's nodes take each call's arguments before the launch
// (cudaGraphExecKernelNodeSetParams), so a chain is built and instantiated once, on the second call that makes it:
// the first goes out launch by launch (the same kernels, the same bits), so that a shape met once (a prompt length a
// server sees one time) costs no graph. Host code.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <memory>

#include "common/kernel_launch.hpp"
#include "common/lru_cache.hpp"

namespace gk::detail {

struct LaunchList {
  static constexpr int kMax = 8;
  KernelLaunch launch[kMax];
  int count = 0;
  // The next launch's slot (null when the list is full: callers add at most kMax).
  KernelLaunch* add() { return count < kMax ? &launch[count++] : nullptr; }
};

class LaunchGraphs {
 public:
  // Chains kept; the least recently used beyond this is destroyed (a launch of it in flight still completes).
  static constexpr size_t kCapacity = 32;
  // Chains met once and not yet built.
  static constexpr size_t kSeenCapacity = 256;
  LaunchGraphs() : cache_(kCapacity), seen_(kSeenCapacity) {}
  LaunchGraphs(const LaunchGraphs&) = delete;
  LaunchGraphs& operator=(const LaunchGraphs&) = delete;

  // Issues `list` on `stream` (which must not be capturing: the caller asks): as one graph launch from the second
  // call of its chain on. Launches of one graph are ordered after each other by CUDA, so two calls of one chain
  // made with one handle on two streams run one after the other (gk.h).
  Status issue(const char* op, const LaunchList& list, cudaStream_t stream);
  size_t size() const { return cache_.size(); }

 private:
  struct NodeKey {
    const void* kernel;
    unsigned grid[3];
    int threads;
    size_t smem;
    bool cluster_z, programmatic;
    bool operator<(const NodeKey& o) const;
  };
  using Key = std::array<NodeKey, LaunchList::kMax>;
  struct Graph;  // the graph, its executable form and its nodes (destroyed with it)
  Status build(const char* op, const LaunchList& list, std::shared_ptr<Graph>* out);
  LruCache<Key, std::shared_ptr<Graph>> cache_;
  LruCache<Key, bool> seen_;
};

// Issues `list` in order, as one graph launch when `graphs` is given and the list has more than one launch.
Status issue_launches(const char* op, const LaunchList& list, LaunchGraphs* graphs, cudaStream_t stream);

}  // namespace gk::detail
