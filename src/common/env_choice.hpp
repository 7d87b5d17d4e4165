// Test and benchmark overrides read from the environment (e.g. GK_ATTENTION_KERNEL=mma): never needed for
// correct results, only to pin one of several equivalent code paths.
#pragma once

#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace gk::detail {

// The position of the variable's value in `names`, or -1 when it is unset or none of them. Callers keep the
// result in a function-local static, so the environment is read once per process.
inline int env_choice(const char* var, std::initializer_list<const char*> names) {
  const char* v = std::getenv(var);
  if (v == nullptr) return -1;
  int i = 0;
  for (const char* n : names) {
    if (std::strcmp(v, n) == 0) return i;
    ++i;
  }
  return -1;
}

}  // namespace gk::detail
