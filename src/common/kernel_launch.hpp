// A kernel launch as a value: the kernel, its grid, its attributes and a copy of its arguments, made with no CUDA call
// and issued later with one (cudaLaunchKernelExC). A call prepares every launch it will make (tensor maps encoded,
// parameter blocks filled) and then issues them back to back, so no host work sits between its kernels (under an
// API-tracing profiler, as NVIDIA's harness runs, each runtime call costs microseconds that would leave the GPU idle).
// Shared-memory opt-ins are set once, at handle creation (device_props.hpp's set_smem_opt_in, called by each
// module's prepare_*_kernels), never at a launch. Host code; the template
// is instantiated by the .cu file that owns the kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>

#include "common/cuda_check.hpp"

namespace gk::detail {

struct LaunchShape {
  dim3 grid;
  int threads = 0;
  size_t smem_bytes = 0;  // dynamic shared memory (above 48 KB: the kernel's opt-in set at handle creation)
  bool cluster_z = false;  // clusters of grid.z CTAs along z
  // Programmatic stream serialization: the kernel may start while the previous kernel of the stream still runs
  // (it must call device::grid_dependency_wait() before it touches that kernel's results, and the previous kernel
  // must not depend on anything this one writes).
  bool programmatic = false;
};

class KernelLaunch {
 public:
  static constexpr size_t kMaxArgBytes = 2048;  // the largest: four tensor maps and two parameter blocks
  static constexpr int kMaxArgs = 8;

  KernelLaunch() = default;
  // `what` names the launch in errors (a string literal: it is kept, not copied).
  template <class... Params, class... Args>
  KernelLaunch(const char* what, void (*kernel)(Params...), const LaunchShape& shape, const Args&... args)
      : what_(what), kernel_(reinterpret_cast<const void*>(kernel)), shape_(shape) {
    static_assert(sizeof...(Params) == sizeof...(Args) && sizeof...(Params) <= kMaxArgs, "one argument per parameter");
    static_assert(packed_bytes<std::decay_t<Params>...>() <= kMaxArgBytes, "arguments past the launch's storage");
    (store<Params>(args), ...);
  }

  bool empty() const { return kernel_ == nullptr; }
  // Whether it goes programmatically behind the kernel before it: known to some callers only when they issue it.
  void set_programmatic(bool on) { shape_.programmatic = on; }
  const LaunchShape& shape() const { return shape_; }
  // The stored arguments as the launch passes them (tests read them back).
  int arg_count() const { return count_; }
  const void* arg(int i) const { return storage_ + offset_[i]; }
  const void* kernel() const { return kernel_; }
  const char* what() const { return what_; }
  // The launch as a graph kernel node's parameters; `ptrs` (kMaxArgs entries) receives the argument pointers.
  cudaKernelNodeParams node_params(void** ptrs) const {
    for (int i = 0; i < count_; ++i) ptrs[i] = const_cast<unsigned char*>(storage_ + offset_[i]);
    cudaKernelNodeParams p{};
    p.func = const_cast<void*>(kernel_);
    p.gridDim = shape_.grid;
    p.blockDim = dim3(static_cast<unsigned>(shape_.threads));
    p.sharedMemBytes = static_cast<unsigned>(shape_.smem_bytes);
    p.kernelParams = ptrs;
    return p;
  }

  // One runtime call. On failure the (non-sticky) error is cleared, so it is reported once, by this status.
  Status issue(const char* op, cudaStream_t stream) const {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = shape_.grid;
    cfg.blockDim = dim3(static_cast<unsigned>(shape_.threads));
    cfg.dynamicSmemBytes = shape_.smem_bytes;
    cfg.stream = stream;
    cudaLaunchAttribute attr[2];
    unsigned n = 0;
    if (shape_.cluster_z) {
      attr[n].id = cudaLaunchAttributeClusterDimension;
      attr[n].val.clusterDim.x = 1;
      attr[n].val.clusterDim.y = 1;
      attr[n].val.clusterDim.z = shape_.grid.z;
      ++n;
    }
    if (shape_.programmatic) {
      attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[n].val.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    cfg.attrs = attr;
    cfg.numAttrs = n;
    void* ptrs[kMaxArgs];
    for (int i = 0; i < count_; ++i) ptrs[i] = const_cast<unsigned char*>(storage_ + offset_[i]);
    const cudaError_t err = cudaLaunchKernelExC(&cfg, kernel_, ptrs);
    if (err != cudaSuccess) (void)cudaGetLastError();
    return cuda_status(err, op, what_);
  }

 private:
  static constexpr size_t aligned(size_t at, size_t align) { return (at + align - 1) / align * align; }
  template <class... T>
  static constexpr size_t packed_bytes() {
    size_t used = 0;
    ((used = aligned(used, alignof(T)) + sizeof(T)), ...);
    return used;
  }

  template <class P, class A>
  void store(const A& a) {
    using T = std::decay_t<P>;
    static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= 128, "kernel arguments are copied bytewise");
    const size_t at = aligned(used_, alignof(T));
    new (storage_ + at) T(a);
    offset_[count_++] = static_cast<uint16_t>(at);
    used_ = at + sizeof(T);
  }

  const char* what_ = "";
  const void* kernel_ = nullptr;
  LaunchShape shape_;
  alignas(128) unsigned char storage_[kMaxArgBytes] = {};  // tensor maps want 64-byte alignment
  uint16_t offset_[kMaxArgs] = {};
  int count_ = 0;
  size_t used_ = 0;
};

// Made and issued at once, for a launch with no other launch of its call to prepare before it.
template <class... Params, class... Args>
Status launch_now(const char* op, const char* what, void (*kernel)(Params...), const LaunchShape& shape,
                  cudaStream_t stream, const Args&... args) {
  return KernelLaunch(what, kernel, shape, args...).issue(op, stream);
}

}  // namespace gk::detail
