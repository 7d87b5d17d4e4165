#include "common/tensor_check.hpp"

#include <string>

#include "common/checked_math.hpp"
#include "common/status_util.hpp"

namespace gk::detail {

size_t dtype_size(gk_dtype dtype) {
  switch (dtype) {
    case GK_DTYPE_BF16:
    case GK_DTYPE_F16:
      return 2;
    case GK_DTYPE_F32:
    case GK_DTYPE_I32:
      return 4;
    default:
      return 0;
  }
}

const char* dtype_name(gk_dtype dtype) {
  switch (dtype) {
    case GK_DTYPE_BF16:
      return "bf16";
    case GK_DTYPE_F16:
      return "f16";
    case GK_DTYPE_F32:
      return "f32";
    case GK_DTYPE_I32:
      return "i32";
    default:
      return "invalid";
  }
}

namespace {

std::string shape_string(const int64_t* shape, int ndim) {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace

int64_t element_count(const gk_tensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim && i < GK_MAX_DIMS; ++i) n *= t.shape[i];
  return n;
}

Status check_tensor(const char* op, const gk_tensor& t, const TensorSpec& spec) {
  const int ndim = static_cast<int>(spec.shape.size());
  if (t.data == nullptr) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: %s: data pointer is null", op, spec.name);
  }
  if (t.dtype != spec.dtype) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: %s: dtype is %s, expected %s", op, spec.name,
                 dtype_name(t.dtype), dtype_name(spec.dtype));
  }
  if (t.ndim != ndim) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: %s: has %d dimensions, expected %d %s", op, spec.name, t.ndim,
                 ndim, shape_string(spec.shape.data(), ndim).c_str());
  }
  for (int i = 0; i < ndim; ++i) {
    if (t.shape[i] != spec.shape[i]) {
      return error(GK_STATUS_INVALID_ARGUMENT, "%s: %s: shape is %s, expected %s", op, spec.name,
                   shape_string(t.shape, ndim).c_str(), shape_string(spec.shape.data(), ndim).c_str());
    }
  }
  int64_t count = 0;
  if (!checked_product(spec.shape.data(), spec.shape.size(), kMaxTensorElements, &count)) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: %s: shape %s has more than 2^48 elements", op, spec.name,
                 shape_string(spec.shape.data(), ndim).c_str());
  }
  int64_t expected_stride = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    if (spec.shape[i] != 1 && t.strides[i] != expected_stride) {
      return error(GK_STATUS_INVALID_ARGUMENT,
                   "%s: %s: stride[%d] is %lld, expected %lld (tensors must be contiguous row-major)", op, spec.name,
                   i, static_cast<long long>(t.strides[i]), static_cast<long long>(expected_stride));
    }
    expected_stride *= spec.shape[i];
  }
  const auto addr = reinterpret_cast<uintptr_t>(t.data);
  if (addr % spec.alignment != 0) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: %s: data pointer %p is not %zu-byte aligned", op, spec.name,
                 t.data, spec.alignment);
  }
  return Status::Ok();
}

Status check_no_overlap(const char* op, const char* out_name, const gk_tensor& out,
                        std::initializer_list<std::pair<const char*, const gk_tensor*>> inputs) {
  const auto out_lo = reinterpret_cast<uintptr_t>(out.data);
  const auto out_hi = out_lo + static_cast<uintptr_t>(element_count(out)) * dtype_size(out.dtype);
  for (const auto& [name, in] : inputs) {
    if (in->data == nullptr) continue;
    const auto lo = reinterpret_cast<uintptr_t>(in->data);
    const auto hi = lo + static_cast<uintptr_t>(element_count(*in)) * dtype_size(in->dtype);
    if (lo < out_hi && out_lo < hi) {
      return error(GK_STATUS_INVALID_ARGUMENT, "%s: %s overlaps input %s (outputs must not alias inputs)", op,
                   out_name, name);
    }
  }
  return Status::Ok();
}

}  // namespace gk::detail
