#include "fill.hpp"
#include "reference.hpp"

namespace gk_testkit {

void fill_host(const FillSpec& spec, float* dst, int64_t n, bool round_to_bf16) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = fill_value_at(spec, i);
    dst[i] = round_to_bf16 ? gk_ref::round_bf16(v) : v;
  }
}

std::vector<float> fill_host(const FillSpec& spec, int64_t n, bool round_to_bf16) {
  std::vector<float> v(static_cast<size_t>(n));
  fill_host(spec, v.data(), n, round_to_bf16);
  return v;
}

void fill_mask_host(float* mask, int64_t batch, int64_t seq_len, MaskPattern pattern) {
  const int64_t n = batch * seq_len * seq_len;
  for (int64_t i = 0; i < n; ++i) mask[i] = gk_ref::round_bf16(mask_value_at(pattern, seq_len, i));
}

}  // namespace gk_testkit
