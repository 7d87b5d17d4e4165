// Properties of the current CUDA device that launch decisions need, queried once per device.
#pragma once

#include "gk/gk.hpp"

namespace gk::detail {

// Streaming multiprocessors of the current device (for persistent grids and split decisions).
Status sm_count(const char* op, int* count);

}  // namespace gk::detail
