// The official correctness rule: an element matches when |out - ref| <= atol + rtol * |ref|; an output passes
// when at least `required` of its elements match, none of them is NaN or Inf, and it is not all zeros.
// The host implementation below and the device one (judge.cu) apply the same rule; the device one exists for
// full-size outputs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace gk_testkit {

struct Judgement {
  int64_t count = 0;
  int64_t matched = 0;
  int64_t non_finite = 0;  // NaN or Inf in the output
  int64_t nonzero = 0;
  double max_abs_err = 0.0;  // over finite elements
  double err_sq = 0.0;       // sum of squared errors, for the relative L2 error
  double ref_sq = 0.0;

  double matched_ratio() const { return count ? double(matched) / double(count) : 0.0; }
  double rel_l2() const { return ref_sq > 0 ? std::sqrt(err_sq / ref_sq) : std::sqrt(err_sq); }
  bool passed(double required_ratio) const {
    return count > 0 && non_finite == 0 && nonzero > 0 && matched_ratio() >= required_ratio;
  }
  // "fail: NaN/Inf" etc., for messages.
  std::string verdict(double required_ratio) const;
  std::string summary(double required_ratio) const;
};

template <typename Out, typename Ref>
Judgement judge_host(const Out* out, const Ref* ref, int64_t n, double atol, double rtol) {
  Judgement j;
  j.count = n;
  for (int64_t i = 0; i < n; ++i) {
    const double o = double(out[i]), r = double(ref[i]);
    if (!std::isfinite(o)) {
      ++j.non_finite;
      continue;
    }
    if (o != 0.0) ++j.nonzero;
    const double err = std::fabs(o - r);
    if (err <= atol + rtol * std::fabs(r)) ++j.matched;
    if (std::isfinite(err)) {
      j.max_abs_err = std::max(j.max_abs_err, err);
      j.err_sq += err * err;
      j.ref_sq += r * r;
    }
  }
  return j;
}

Judgement judge_device(const __nv_bfloat16* out, const __nv_bfloat16* ref, int64_t n, double atol, double rtol,
                       cudaStream_t stream);
Judgement judge_device(const float* out, const double* ref, int64_t n, double atol, double rtol,
                       cudaStream_t stream);

}  // namespace gk_testkit
