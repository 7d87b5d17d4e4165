// Properties of the current CUDA device that launch decisions need, queried once per device.
#pragma once

#include "gk/gk.hpp"

namespace gk::detail {

// Streaming multiprocessors of the current device (for persistent grids and split decisions).
Status sm_count(const char* op, int* count);

// How many clusters of `cluster_size` CTAs (along one grid dimension) of `kernel` with this block size and dynamic
// shared memory can be resident at once (cudaOccupancyMaxActiveClusters), cached per device, kernel and size.
// Clusters are placed within one GPC, so this can be less than SMs / cluster_size: a grid with more clusters than
// this runs a second wave. The kernel's shared-memory opt-in must already be set. 0 when the runtime cannot say.
Status max_active_clusters(const char* op, const void* kernel, int threads, size_t smem_bytes, int cluster_size,
                           int* clusters);

}  // namespace gk::detail
