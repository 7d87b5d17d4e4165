// A plain reference of the audio operator's fp16 operands (issue 38), written apart from
// src/audio_qkv/f16_operands.hpp: double arithmetic for the scale and tf32's rounding, the compiler's _Float16
// for fp16's round-to-nearest-even (f16_operands.cpp, built without nvcc).
#pragma once

#include <cstdint>

namespace gk_test {

// 14 - floor(log2(largest finite |x| of the row)), 0 for a row with no finite nonzero.
int ref_scale_exponent(const float* row, int k);
// x rounded to tf32 (ties away from zero) as fp32, scaled by 2^e, as fp16 bits.
uint16_t ref_tf32_f16(float x, int e);
// The exact mode's terms: hi = fp16(x 2^e), lo = fp16((x 2^e - hi) 2^11).
void ref_split(float x, int e, uint16_t* hi, uint16_t* lo);
// Two fp16 operands that are the same value for a GEMM: equal bits, both NaN, or both zero of either sign (a
// residual below fp16's range may round to -0 in one computation and +0 in another; either adds nothing).
bool ref_same_f16(uint16_t a, uint16_t b);

}  // namespace gk_test
