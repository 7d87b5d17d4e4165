#include "common/device_props.hpp"

#include <cuda_runtime_api.h>

#include "common/cuda_check.hpp"

namespace gk::detail {

Status sm_count(const char* op, int* count) {
  int device = 0;
  GK_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), op, "cudaGetDevice"));
  return cuda_status(cudaDeviceGetAttribute(count, cudaDevAttrMultiProcessorCount, device), op,
                     "cudaDeviceGetAttribute(multiProcessorCount)");
}

Status set_smem_opt_in(const char* op, const void* kernel, size_t smem_bytes) {
  return cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem_bytes)),
                     op, "cudaFuncSetAttribute(dynamic shared memory)");
}

Status max_active_blocks(const char* /*op*/, const void* kernel, int threads, size_t smem_bytes, int* blocks) {
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem_bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // unanswerable: nothing counts as resident and the planners take another kernel
    n = 0;
  }
  *blocks = n;
  return Status::Ok();
}

Status max_active_clusters(const char* op, const void* kernel, int threads, size_t smem_bytes, int cluster_size,
                           int* clusters) {
  GK_RETURN_IF_ERROR(set_smem_opt_in(op, kernel, smem_bytes));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(1, 1, static_cast<unsigned>(cluster_size));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = smem_bytes;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = static_cast<unsigned>(cluster_size);
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
    // Unanswerable here (e.g. under MPS limits): no cluster of this size counts as resident, so the planners take
    // a grid without clusters instead of failing the call. The error is not sticky; clear it.
    (void)cudaGetLastError();
    n = 0;
  }
  *clusters = n;
  return Status::Ok();
}

}  // namespace gk::detail
