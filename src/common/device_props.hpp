// What the planners need to know about the device, queried once when a handle is created (api/handle.cpp) and
// passed to them as a value: launchers never query the device.
#pragma once

#include <cstddef>

#include "gk/gk.hpp"

namespace gk::detail {

// Cluster sizes the split-K kernels may take (index = CTAs per cluster along K).
inline constexpr int kMaxClusterSplit = 8;

struct DeviceInfo {
  int sms = 0;
  // cudaOccupancyMaxActiveClusters of each split-K kernel's cluster form, by cluster size (0 where that size cannot
  // be resident or was not asked). Clusters stay within a GPC, so this can be below sms / size.
  int proj_splitk_clusters[2][kMaxClusterSplit + 1] = {};  // layer projection, [heads per tile - 1][size]
  int audio_tf32_clusters[kMaxClusterSplit + 1] = {};      // audio tf32 split-K kernel (with rounding groups)
  int audio_tf32x3_clusters[kMaxClusterSplit + 1] = {};    // audio exact (tf32x3) split-K kernel
  int head_gemm_clusters = 0;                              // the persistent tf32 head GEMM, clusters of 2
  int audio_f16_pingpong_clusters[2] = {};                 // the fp16 ping-pong kernel's clusters of 2, [heads - 1]
  // The few-row projection (skinny_proj_gemm.cuh), by unit (0: 128 columns, 1: 256): CTAs resident per SM, and
  // clusters of each size resident at once.
  int skinny_proj_blocks_per_sm[2] = {};
  int skinny_proj_clusters[2][kMaxClusterSplit + 1] = {};
};

// The kernel's dynamic shared memory above the 48 KB default, on the current device: once, when a handle is
// created, for every kernel the library may launch with more (kernel_launch.hpp never sets it).
Status set_smem_opt_in(const char* op, const void* kernel, size_t smem_bytes);

// Streaming multiprocessors of the current device.
Status sm_count(const char* op, int* count);

// How many CTAs of `kernel` with this block size and dynamic shared memory fit one SM (0 when the runtime cannot say).
Status max_active_blocks(const char* op, const void* kernel, int threads, size_t smem_bytes, int* blocks);

// How many clusters of `cluster_size` CTAs (along one grid dimension) of `kernel` with this block size and dynamic
// shared memory can be resident at once (cudaOccupancyMaxActiveClusters); sets the kernel's shared-memory opt-in
// first. 0 when the runtime cannot say.
Status max_active_clusters(const char* op, const void* kernel, int threads, size_t smem_bytes, int cluster_size,
                           int* clusters);

}  // namespace gk::detail
