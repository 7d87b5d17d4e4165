// Building Status values with formatted messages, and early-return helpers for the host code.
#pragma once

#include <cstdio>
#include <string>
#include <utility>

#include "gk/gk.hpp"

namespace gk::detail {

template <typename... Args>
std::string format(const char* fmt, Args... args) {
  int n = std::snprintf(nullptr, 0, fmt, args...);
  if (n < 0) return fmt;
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), fmt, args...);
  out.resize(static_cast<size_t>(n));
  return out;
}

template <typename... Args>
Status error(gk_status code, const char* fmt, Args... args) {
  return Status(code, format(fmt, args...));
}

}  // namespace gk::detail

#define GK_RETURN_IF_ERROR(expr)              \
  do {                                        \
    ::gk::Status gk_status_tmp_ = (expr);     \
    if (!gk_status_tmp_.ok()) return gk_status_tmp_; \
  } while (0)
