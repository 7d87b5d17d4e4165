// The operands of the exact mode's 3xTF32 GEMMs. Every fp32 x is written as big + small, big = x rounded to
// nearest tf32 and small = (x - big) rounded to nearest tf32 (x - big is exact in fp32), so
//   x * w ~= xb * wb + xb * ws + xs * wb
// with the dropped xs * ws below 2^-22 |x w|. Each product of two tf32 values is exact in the fp32 accumulator,
// so one tf32 tensor-core GEMM over K' = 3K reproduces the fp32 product: activations are laid out [xb | xb | xs]
// and weights [wb | ws | wb] along K (one launch for the activations and the three weights).
#include <cuda_runtime.h>

#include "audio_qkv/kernels.hpp"
#include "common/cuda_check.hpp"

namespace gk::audio {

namespace {

constexpr const char* kOp = "audio_qkv";

__device__ __forceinline__ float rna_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

struct Parts {
  float4 big, small;
};

__device__ __forceinline__ Parts split(float4 x) {
  Parts p;
  p.big = make_float4(rna_tf32(x.x), rna_tf32(x.y), rna_tf32(x.z), rna_tf32(x.w));
  p.small = make_float4(rna_tf32(x.x - p.big.x), rna_tf32(x.y - p.big.y), rna_tf32(x.z - p.big.z),
                        rna_tf32(x.w - p.big.w));
  return p;
}

// Grid-stride over the float4s of all segments; k4 = K / 4.
__global__ void split_kernel(const Split3xTf32Params p, int64_t total4) {
  const int64_t k4 = p.k / 4;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total4; i += int64_t(gridDim.x) * blockDim.x) {
    int s = 0;
    while (i >= p.seg[s].end4) ++s;
    const Split3xTf32Segment& seg = p.seg[s];
    const int64_t j = i - (s == 0 ? 0 : p.seg[s - 1].end4);
    const int64_t row = j / k4, col4 = j % k4;
    const Parts x = split(reinterpret_cast<const float4*>(seg.src)[j]);
    float4* dst = reinterpret_cast<float4*>(seg.dst) + row * 3 * k4 + col4;
    dst[0] = seg.weights ? x.big : x.small;
    dst[k4] = seg.weights ? x.small : x.big;
    dst[2 * k4] = x.big;
  }
}

}  // namespace

Status launch_split_3xtf32(const Split3xTf32Params& params, cudaStream_t stream) {
  Split3xTf32Params p = params;
  if (p.k % 4 != 0 || p.segments < 1 || p.segments > Split3xTf32Params::kMaxSegments) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: 3xTF32 split of %d segments, K = %lld", kOp, p.segments,
                         static_cast<long long>(p.k));
  }
  int64_t end4 = 0;
  for (int s = 0; s < p.segments; ++s) {
    end4 += p.seg[s].rows * (p.k / 4);
    p.seg[s].end4 = end4;
  }
  if (end4 == 0) return Status::Ok();
  const int64_t blocks = std::min<int64_t>((end4 + 255) / 256, 132 * 16);
  split_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p, end4);
  return detail::check_launch(kOp, "3xTF32 split launch");
}

}  // namespace gk::audio
