// Shared glue of the SOL-ExecBench entry points: torch tensors as gk_tensor descriptors, a libgk handle per
// device, the call's workspace from PyTorch's caching allocator, and failures as Python exceptions (TORCH_CHECK)
// carrying the library's message. The calls run on PyTorch's current stream and never synchronize.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <mutex>
#include <vector>

#include "gk/gk.hpp"

namespace gk_sol {

inline gk_dtype dtype_of(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kBFloat16:
      return GK_DTYPE_BF16;
    case torch::kHalf:
      return GK_DTYPE_F16;
    case torch::kFloat:
      return GK_DTYPE_F32;
    default:
      return GK_DTYPE_INVALID;
  }
}

inline gk_tensor desc(const torch::Tensor& t) {
  TORCH_CHECK(t.dim() <= GK_MAX_DIMS, "gemma_kernels: at most ", GK_MAX_DIMS, " dimensions");
  gk_tensor d{};
  d.data = t.data_ptr();
  d.dtype = dtype_of(t);
  d.ndim = static_cast<int32_t>(t.dim());
  for (int64_t i = 0; i < t.dim(); ++i) {
    d.shape[i] = t.size(i);
    d.strides[i] = t.stride(i);
  }
  return d;
}

inline void check(gk_status s) {
  TORCH_CHECK(s == GK_STATUS_SUCCESS, "gemma_kernels: ", gk_last_error_message());
}

// One handle per device for the life of the module (the harness is one thread; the mutex keeps it safe). `static`,
// not `inline`: an inline function's statics are one object per process (GNU unique symbols), so two packages loaded
// into one process would share the handle that one of them made for its own copy of the kernels.
static gk_handle_t handle_for(int device) {
  static std::mutex mu;
  static std::vector<gk_handle_t> handles;
  std::lock_guard<std::mutex> lock(mu);
  if (device >= static_cast<int>(handles.size())) handles.resize(device + 1, nullptr);
  if (handles[device] == nullptr) check(gk_handle_create(&handles[device]));
  return handles[device];
}

inline void same_device(const std::vector<torch::Tensor>& ts) {
  for (const auto& t : ts) {
    TORCH_CHECK(t.is_cuda() && t.device() == ts.front().device(),
                "gemma_kernels: every tensor must be on the same CUDA device");
  }
}

inline torch::Tensor workspace(size_t bytes, const torch::Device& device) {
  return torch::empty({static_cast<int64_t>(bytes)}, torch::TensorOptions().dtype(torch::kUInt8).device(device));
}

// What every entry point does once its config and descriptors are filled: the operator's contract check, a
// workspace of the queried size from PyTorch's allocator, and the forward call on the current stream.
template <class Config, class Tensors>
void run_operator(gk_status (*check_call)(const Config*, const Tensors*),
                  gk_status (*workspace_size)(const Config*, size_t*),
                  gk_status (*forward)(gk_handle_t, const Config*, const Tensors*, void*, size_t, gk_stream_t),
                  const Config& c, const Tensors& t, const torch::Tensor& anchor) {
  check(check_call(&c, &t));
  size_t bytes = 0;
  check(workspace_size(&c, &bytes));
  const torch::Tensor ws = workspace(bytes, anchor.device());
  const auto stream = reinterpret_cast<gk_stream_t>(at::cuda::getCurrentCUDAStream().stream());
  check(forward(handle_for(anchor.get_device()), &c, &t, ws.data_ptr(), bytes, stream));
}

}  // namespace gk_sol
