// K split over a thread-block cluster along grid z, as both fused GEMM kernels (the audio QKV projection and the
// layer's projection GEMM) use it for few row tiles: the choice of the split and the launch. Host code; the
// launch template is instantiated by the .cu file that owns the kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "common/cuda_check.hpp"
#include "common/device_props.hpp"

namespace gk::detail {

// The kernel's dynamic shared memory above the 48 KB default.
inline Status set_smem_opt_in(const char* op, const void* kernel, size_t smem_bytes) {
  return cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem_bytes)),
                     op, "cudaFuncSetAttribute(dynamic shared memory)");
}

// The largest of `candidates` (largest first) whose grid of tiles x split CTAs fits in one wave - within the SMs,
// and within the clusters that can be resident at once (they stay within a GPC: 40 clusters of 3 did not fit on
// the H200 and ran a second wave) - and leaves each CTA at least two K-blocks (with `even_k`, the same number).
// 1 when the tiles alone fill half the SMs. `split_kernel` is the kernel's cluster instantiation.
inline Status choose_cluster_split(const char* op, const void* split_kernel, int threads, size_t smem_bytes,
                                   int64_t tiles, int k_blocks, std::initializer_list<int> candidates, bool even_k,
                                   int* split) {
  *split = 1;
  int sms = 0;
  GK_RETURN_IF_ERROR(sm_count(op, &sms));
  if (2 * tiles > sms) return Status::Ok();
  GK_RETURN_IF_ERROR(set_smem_opt_in(op, split_kernel, smem_bytes));
  for (int s : candidates) {
    if (tiles * s > sms || k_blocks / s < 2 || (even_k && k_blocks % s != 0)) continue;
    int resident = 0;
    GK_RETURN_IF_ERROR(max_active_clusters(op, split_kernel, threads, smem_bytes, s, &resident));
    if (tiles <= resident) {
      *split = s;
      return Status::Ok();
    }
  }
  return Status::Ok();
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
