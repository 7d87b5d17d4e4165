#include "common/device_props.hpp"

#include <cuda_runtime_api.h>

#include <mutex>

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

}  // namespace gk::detail
