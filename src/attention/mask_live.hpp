// Whether an additive mask value is "live" (some probability can survive it) or "dead" (mask_logit2 clamps it to
// -FLT_MAX, mask_policy.cuh), decided by one comparison with a bf16 bound instead of the multiply, the clamp
// and a comparison: the mask classification (mask_tiles.cu) tests every value of the mask with it, 134 MB at
// S = 8192. Plain C++ for the device and the host tests alike; tests/host/mask_live_test.cpp checks it against
// mask_logit2's arithmetic for every bf16 value.
//
// mask_logit2(m) = max(m * log2(e), -FLT_MAX) in fp32. The product is monotone in m, so the dead values are NaN
// and every m at or below the largest one whose product rounds to -FLT_MAX or beyond: -1.390625 * 2^127 (bf16
// 0xff32; its product 2.006 * 2^127 overflows), while -1.3828125 * 2^127, the next bf16 above, gives -1.995 * 2^127.
// A bf16 value m, widened to fp32, is live exactly when m > that bound; NaN compares false, so it is dead, as
// mask_logit2 makes it (fmaxf returns -FLT_MAX for a NaN).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GK_MASK_LIVE_FN __host__ __device__ __forceinline__
#else
#define GK_MASK_LIVE_FN inline
#endif

namespace gk::gemma3 {

inline constexpr uint16_t kMaskDeadBoundBf16 = 0xff32;     // the largest dead bf16 value
inline constexpr float kMaskDeadBound = -0x1.64p+127f;     // the same value as fp32: -1.390625 * 2^127

// m: a bf16 mask value widened to fp32 (exact). NaN is dead.
GK_MASK_LIVE_FN bool mask_value_live(float m) { return m > kMaskDeadBound; }

}  // namespace gk::gemma3
