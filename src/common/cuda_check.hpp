// Turning CUDA runtime errors into Status values that name the step that failed.
#pragma once

#include <cuda_runtime_api.h>

#include "common/status_util.hpp"

namespace gk::detail {

inline Status cuda_status(cudaError_t err, const char* op, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return error(GK_STATUS_CUDA_ERROR, "%s: %s failed: %s (%s)", op, what, cudaGetErrorName(err),
               cudaGetErrorString(err));
}

// Whether `stream` is capturing a CUDA graph (a call then leaves its launches to the caller's graph).
inline Status stream_capturing(const char* op, cudaStream_t stream, bool* capturing) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  GK_RETURN_IF_ERROR(cuda_status(cudaStreamIsCapturing(stream, &status), op, "cudaStreamIsCapturing"));
  *capturing = status != cudaStreamCaptureStatusNone;
  return Status::Ok();
}

}  // namespace gk::detail
