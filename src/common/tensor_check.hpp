// Validation of gk_tensor descriptors against an operator's contract. Every failure names the operator and the
// offending argument, so a caller can fix the call from the message alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "gk/gk.hpp"

namespace gk::detail {

// Largest element count a tensor may have: keeps every byte offset far inside int64 in device code.
inline constexpr int64_t kMaxTensorElements = int64_t(1) << 48;

size_t dtype_size(gk_dtype dtype);
const char* dtype_name(gk_dtype dtype);

struct TensorSpec {
  const char* name;
  gk_dtype dtype;
  std::vector<int64_t> shape;
  size_t alignment;  // bytes the data pointer must be aligned to
};

// Checks null data, dtype, rank, shape, row-major contiguity, alignment and size.
Status check_tensor(const char* op, const gk_tensor& t, const TensorSpec& spec);

// Checks that `out` shares no bytes with any of `inputs` (in-place use is not supported).
Status check_no_overlap(const char* op, const char* out_name, const gk_tensor& out,
                        std::initializer_list<std::pair<const char*, const gk_tensor*>> inputs);

int64_t element_count(const gk_tensor& t);

}  // namespace gk::detail
