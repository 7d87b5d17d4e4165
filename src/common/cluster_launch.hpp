// Kernel launches with the attributes the library's kernels use: a thread-block cluster along grid z (the split-K
// kernels) and programmatic stream serialization. Host code; the template is instantiated by the .cu file that owns
// the kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/cuda_check.hpp"

namespace gk::detail {

// The kernel's dynamic shared memory above the 48 KB default.
inline Status set_smem_opt_in(const char* op, const void* kernel, size_t smem_bytes) {
  return cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem_bytes)),
                     op, "cudaFuncSetAttribute(dynamic shared memory)");
}

// Launches `kernel` on `grid` (with its shared-memory opt-in), as clusters of grid.z CTAs along z when `cluster`.
// `programmatic`: programmatic stream serialization, so the kernel may start while the previous kernel of the
// stream still runs (the kernel itself must call device::grid_dependency_wait() before it touches that kernel's
// results, and the previous kernel must not depend on anything this one writes).
template <class... Params, class... Args>
Status launch_z_clusters(const char* op, const char* what, void (*kernel)(Params...), dim3 grid, int threads,
                         size_t smem_bytes, bool cluster, bool programmatic, cudaStream_t stream,
                         const Args&... args) {
  // A kernel without dynamic shared memory needs no opt-in (a driver call per launch saved).
  if (smem_bytes > 0) GK_RETURN_IF_ERROR(set_smem_opt_in(op, reinterpret_cast<const void*>(kernel), smem_bytes));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cluster) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = 1;
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = grid.z;
    ++n;
  }
  if (programmatic) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  GK_RETURN_IF_ERROR(cuda_status(cudaLaunchKernelEx(&cfg, kernel, args...), op, what));
  return check_launch(op, what);
}

}  // namespace gk::detail
