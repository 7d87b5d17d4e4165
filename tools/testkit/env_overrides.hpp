// GK_OVERRIDES, the pins the CLI and the tests take from the environment (the library itself reads none): the spec
// is handed to gk_handle_set_overrides, whose parser rejects a bad one with a message.
#pragma once

#include "gk/gk.hpp"

namespace gk_testkit {

// The handle's pins set from GK_OVERRIDES (unset or empty: none).
gk::Status apply_env_overrides(gk_handle_t handle);

}  // namespace gk_testkit
