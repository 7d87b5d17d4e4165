#include "api/handle.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <random>

#include "common/cuda_check.hpp"
#include "common/workspace.hpp"
#include "attention/attention.hpp"
#include "audio_qkv/launchers.hpp"
#include "projection/projection.hpp"

namespace gk {

Status Handle::init() {
  reset();
  const gk_status s = gk_handle_create(&h_);
  return s == GK_STATUS_SUCCESS ? Status::Ok() : Status(s, gk_last_error_message());
}

Status set_overrides(gk_handle_t handle, const char* spec) {
  if (handle == nullptr) return detail::error(GK_STATUS_INVALID_ARGUMENT, "gk_handle_set_overrides: handle is null");
  return detail::parse_overrides(spec, &handle->overrides);
}

namespace detail {

Status create_handle(gk_handle_t* out) {
  if (out == nullptr) return error(GK_STATUS_INVALID_ARGUMENT, "gk_handle_create: handle pointer is null");
  *out = nullptr;
  auto h = std::unique_ptr<gk_handle_st>(new (std::nothrow) gk_handle_st);
  if (!h) return error(GK_STATUS_INTERNAL_ERROR, "gk_handle_create: out of host memory");
  GK_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&h->device), "gk_handle_create", "cudaGetDevice"));
  GK_RETURN_IF_ERROR(h->gemm.init());
  GK_RETURN_IF_ERROR(h->side.init());
  GK_RETURN_IF_ERROR(sm_count("gk_handle_create", &h->device_info.sms));
  // Every kernel's shared-memory opt-in is set here, once, so that no call makes that driver call between launches.
  GK_RETURN_IF_ERROR(gemma3::prepare_splitk_proj_kernels(&h->device_info));
  GK_RETURN_IF_ERROR(gemma3::prepare_skinny_proj_kernels(&h->device_info));
  GK_RETURN_IF_ERROR(gemma3::prepare_attention_kernels());
  GK_RETURN_IF_ERROR(audio::prepare_audio_kernels(&h->device_info));
  // Distinct across handles and processes; random_device may throw where it has no source, and the clock and the
  // handle's address still differ then.
  uint64_t seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) * 0x9e3779b97f4a7c15ull ^
                  reinterpret_cast<uintptr_t>(h.get());
  try {
    std::random_device rd;
    seed ^= (uint64_t(rd()) << 32) ^ rd();
  } catch (...) {
  }
  h->epoch = seed;
  *out = h.release();
  return Status::Ok();
}

SideStream::~SideStream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  if (fork_ != nullptr) cudaEventDestroy(fork_);
  if (join_ != nullptr) cudaEventDestroy(join_);
}

Status SideStream::init() {
  constexpr const char* kOp = "gk_handle_create";
  int least = 0, greatest = 0;
  GK_RETURN_IF_ERROR(cuda_status(cudaDeviceGetStreamPriorityRange(&least, &greatest), kOp,
                                 "cudaDeviceGetStreamPriorityRange"));
  GK_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest), kOp,
                                 "cudaStreamCreateWithPriority"));
  GK_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming), kOp, "cudaEventCreate"));
  return cuda_status(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming), kOp, "cudaEventCreate");
}

Status SideStream::fork(const char* op, cudaStream_t main) {
  GK_RETURN_IF_ERROR(cuda_status(cudaEventRecord(fork_, main), op, "cudaEventRecord(fork)"));
  return cuda_status(cudaStreamWaitEvent(stream_, fork_, 0), op, "cudaStreamWaitEvent(fork)");
}

Status SideStream::join(const char* op, cudaStream_t main) {
  GK_RETURN_IF_ERROR(cuda_status(cudaEventRecord(join_, stream_), op, "cudaEventRecord(join)"));
  return cuda_status(cudaStreamWaitEvent(main, join_, 0), op, "cudaStreamWaitEvent(join)");
}

Status check_handle(const char* op, gk_handle_t handle) {
  if (handle == nullptr) return error(GK_STATUS_INVALID_ARGUMENT, "%s: handle is null", op);
  int device = -1;
  GK_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), op, "cudaGetDevice"));
  if (device != handle->device) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: handle was created on device %d but device %d is current", op,
                 handle->device, device);
  }
  return Status::Ok();
}

Status check_call(const char* op, gk_handle_t handle, void* workspace, size_t workspace_bytes, size_t needed) {
  if (workspace == nullptr) return error(GK_STATUS_INVALID_ARGUMENT, "%s: workspace is null", op);
  if (reinterpret_cast<uintptr_t>(workspace) % WorkspaceCarver::kAlign != 0) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: workspace %p is not %zu-byte aligned", op, workspace,
                 WorkspaceCarver::kAlign);
  }
  if (workspace_bytes < needed) {
    return error(GK_STATUS_WORKSPACE_TOO_SMALL, "%s: workspace is %zu bytes, this call needs %zu", op,
                 workspace_bytes, needed);
  }
  return check_handle(op, handle);
}

}  // namespace detail
}  // namespace gk
