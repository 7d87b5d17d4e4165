// Adversarial rows for the audio operator's fp16 operands (issue 38): the host tests of the conversion's arithmetic
// and the GPU test of its pass read the same ones.
#pragma once

#include <cstdint>
#include <vector>

namespace gk_testkit {

// rows x k floats, row r of kind r % 8: magnitudes of the row's own scale 2^-100 .. 2^100 spread 2^+-30 (elements
// below fp16's subnormals at the row's scale included); zeros; one huge element among tiny ones; fp32 denormals
// and signed zeros; Inf and NaN among ordinary values; tf32 rounding ties; the largest finite floats (some round
// up to infinity in tf32); and (kinds 0 and 7) the plain spread.
std::vector<float> f16_adversarial_rows(int64_t rows, int k, uint32_t seed);

}  // namespace gk_testkit
