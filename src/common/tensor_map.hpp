// TMA tensor maps (host side): tiled descriptors with the 128-byte swizzle that the Hopper kernels' wgmma
// shared-memory descriptors expect. The driver entry point is looked up once through the runtime, so the library
// needs no link-time dependency on libcuda.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "gk/gk.hpp"

namespace gk::detail {

// A row-major tensor of `rank` (2 or 3) dimensions, innermost first: dims[0] elements of `elem_bytes` each are
// contiguous, strides_bytes[i] is the byte stride of dimension i + 1. Boxes of box[0] x box[1] (x box[2]); reads
// outside the tensor return zeros.
Status encode_tiled_map(const char* op, CUtensorMap* map, CUtensorMapDataType type, int rank, const void* base,
                        const uint64_t* dims, const uint64_t* strides_bytes, const uint32_t* box);

}  // namespace gk::detail
