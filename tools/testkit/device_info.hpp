// The current CUDA device as the benchmark and `gk info` report it.
#pragma once

#include "bench_report.hpp"

namespace gk_testkit {

DeviceInfo query_device();  // throws when no device is usable

}  // namespace gk_testkit
