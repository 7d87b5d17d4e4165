#include "env_overrides.hpp"

#include <cstdlib>

namespace gk_testkit {

gk::Status apply_env_overrides(gk_handle_t handle) {
  const gk::Status s = gk::set_overrides(handle, std::getenv("GK_OVERRIDES"));
  return s.ok() ? s : gk::Status(s.code(), "GK_OVERRIDES: " + s.message());
}

}  // namespace gk_testkit
