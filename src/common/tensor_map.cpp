#include "common/tensor_map.hpp"

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "common/status_util.hpp"

namespace gk::detail {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      f = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

}  // namespace

Status encode_tiled_map(const char* op, CUtensorMap* map, CUtensorMapDataType type, int rank, const void* base,
                        const uint64_t* dims, const uint64_t* strides_bytes, const uint32_t* box) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr) {
    return error(GK_STATUS_CUDA_ERROR, "%s: cuTensorMapEncodeTiled is not available from the driver", op);
  }
  cuuint64_t d[3] = {}, s[2] = {};
  cuuint32_t b[3] = {}, elem_strides[3] = {1, 1, 1};
  for (int i = 0; i < rank; ++i) {
    d[i] = dims[i];
    b[i] = box[i];
    if (i + 1 < rank) s[i] = strides_bytes[i];
  }
  const CUresult r = encode(map, type, static_cast<cuuint32_t>(rank), const_cast<void*>(base), d, s, b, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return error(GK_STATUS_CUDA_ERROR, "%s: cuTensorMapEncodeTiled failed (CUresult %d)", op, int(r));
  }
  return Status::Ok();
}

}  // namespace gk::detail
