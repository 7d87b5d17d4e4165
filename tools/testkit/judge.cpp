#include <cstdio>

#include "judge.hpp"

namespace gk_testkit {

std::string Judgement::verdict(double required_ratio) const {
  if (count == 0) return "FAIL (empty)";
  if (non_finite > 0) return "FAIL (NaN/Inf)";
  if (nonzero == 0) return "FAIL (all zero)";
  return matched_ratio() >= required_ratio ? "pass" : "FAIL (matched ratio)";
}

std::string Judgement::summary(double required_ratio) const {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s: matched %.6f (%lld/%lld), max_abs_err %.4g, rel_l2 %.3g, non-finite %lld",
                verdict(required_ratio).c_str(), matched_ratio(), static_cast<long long>(matched),
                static_cast<long long>(count), max_abs_err, rel_l2(), static_cast<long long>(non_finite));
  return buf;
}

}  // namespace gk_testkit
