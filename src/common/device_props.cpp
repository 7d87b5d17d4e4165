#include "common/device_props.hpp"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <tuple>

#include "common/cuda_check.hpp"

namespace gk::detail {

Status sm_count(const char* op, int* count) {
  constexpr int kMaxDevices = 64;
  static std::mutex mu;
  static int cached[kMaxDevices] = {};
  int device = 0;
  GK_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), op, "cudaGetDevice"));
  {
    std::lock_guard<std::mutex> lock(mu);
    if (device < kMaxDevices && cached[device] > 0) {
      *count = cached[device];
      return Status::Ok();
    }
  }
  int n = 0;
  GK_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device), op,
                                 "cudaDeviceGetAttribute(multiProcessorCount)"));
  if (device < kMaxDevices) {
    std::lock_guard<std::mutex> lock(mu);
    cached[device] = n;
  }
  *count = n;
  return Status::Ok();
}

Status max_active_clusters(const char* op, const void* kernel, int threads, size_t smem_bytes, int cluster_size,
                           int* clusters) {
  using Key = std::tuple<int, const void*, int, size_t, int>;
  static std::mutex mu;
  static std::map<Key, int> cached;
  int device = 0;
  GK_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), op, "cudaGetDevice"));
  const Key key{device, kernel, threads, smem_bytes, cluster_size};
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = cached.find(key);
    if (it != cached.end()) {
      *clusters = it->second;
      return Status::Ok();
    }
  }
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
    // Unanswerable here (e.g. under MPS limits): report no cluster of this size as resident, so callers take a
    // grid without clusters instead of failing the call. The error is not sticky; clear it.
    cudaGetLastError();
    n = 0;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    cached[key] = n;
  }
  *clusters = n;
  return Status::Ok();
}

}  // namespace gk::detail
