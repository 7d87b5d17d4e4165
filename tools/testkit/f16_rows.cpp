#include "f16_rows.hpp"

#include <cmath>
#include <cstring>
#include <random>

namespace gk_testkit {

namespace {

float with_bits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

// Row r: the pattern r % 8 (f16_rows.hpp).
void fill_row(std::vector<float>& row, int64_t r, std::mt19937& rng) {
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::uniform_int_distribution<int> spread(-30, 30);
  const int k = static_cast<int>(row.size());
  const int kind = static_cast<int>(r % 8);
  const int scale = static_cast<int>(r * 37 % 201) - 100;  // the row's exponent, -100 .. 100
  for (int i = 0; i < k; ++i) row[i] = std::ldexp(unit(rng), scale + spread(rng));
  switch (kind) {
    case 1:  // zeros
      for (float& x : row) x = 0.f;
      break;
    case 2:  // one huge element among tiny ones
      for (float& x : row) x = std::ldexp(unit(rng), -60);
      row[r % k] = 3.0e37f;
      break;
    case 3:  // fp32 denormals and signed zeros
      for (int i = 0; i < k; ++i) row[i] = with_bits((rng() & 0x807fffffu)) * (i % 3 == 0 ? 0.f : 1.f);
      break;
    case 4:  // Inf and NaN among ordinary values
      row[0] = INFINITY;
      row[k / 2] = -INFINITY;
      row[k - 1] = NAN;
      break;
    case 5:  // tf32 ties: 11 significant bits then exactly half a quantum
      for (int i = 0; i < k; ++i) row[i] = with_bits((rng() & 0x807fe000u) | 0x3f001000u);
      break;
    case 6:  // the largest finite floats (tf32 rounds some up to infinity)
      for (int i = 0; i < k; ++i) row[i] = with_bits(0x7f7fe000u | (rng() & 0x80001fffu));
      break;
    default:
      break;
  }
}

}  // namespace

std::vector<float> f16_adversarial_rows(int64_t rows, int k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> out(size_t(rows) * k), row(k);
  for (int64_t r = 0; r < rows; ++r) {
    fill_row(row, r, rng);
    std::memcpy(out.data() + r * k, row.data(), sizeof(float) * k);
  }
  return out;
}

}  // namespace gk_testkit
