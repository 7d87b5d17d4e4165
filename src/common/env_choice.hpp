// Test and benchmark overrides read from the environment (e.g. GK_ATTENTION_KERNEL=mma): never needed for
// correct results, only to pin one of several equivalent code paths.
#pragma once

#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "common/status_util.hpp"

namespace gk::detail {

inline constexpr int kEnvUnset = -1;    // the automatic choice
inline constexpr int kEnvInvalid = -2;  // set to none of the names: an error, never a silent fall-back

// The position of the variable's value in `names`, kEnvUnset when it is unset or empty, kEnvInvalid for any other
// value. Callers keep the result in a function-local static, so the environment is read once per process, and
// turn kEnvInvalid into env_error's status.
inline int env_choice(const char* var, std::initializer_list<const char*> names) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return kEnvUnset;
  int i = 0;
  for (const char* n : names) {
    if (std::strcmp(v, n) == 0) return i;
    ++i;
  }
  return kEnvInvalid;
}

// The error for a misspelled override: `allowed` lists the values, e.g. "fused|cublas".
inline Status env_error(const char* op, const char* var, const char* allowed) {
  return error(GK_STATUS_INVALID_ARGUMENT, "%s: %s is set to a value other than %s (unset it for the automatic choice)",
               op, var, allowed);
}

}  // namespace gk::detail
