// What a gk_handle_t owns: the device it was created on and the cuBLASLt plans.
#pragma once

#include <cstddef>

#include "common/gemm.hpp"

struct gk_handle_st {
  int device = 0;
  gk::detail::GemmRunner gemm;
};

namespace gk::detail {
// Fails when the handle is null or the current device is not the handle's.
Status check_handle(const char* op, gk_handle_t handle);
// The per-call preconditions every operator shares: a usable handle and a large enough, aligned workspace.
Status check_call(const char* op, gk_handle_t handle, void* workspace, size_t workspace_bytes, size_t needed);
}  // namespace gk::detail
