// The fp16 operand pass of the audio operator (src/audio_qkv/f16_rows.cuh) launched directly, bit for bit against a
// plain reference (reference/cpu/f16_operands.cpp: double arithmetic and the compiler's _Float16): every row's
// scale exponent, the tf32 mode's one term and the exact mode's two terms, over the adversarial rows of
// gk_testkit::f16_adversarial_rows.
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "audio_qkv/f16_rows.cuh"
#include "device_buffer.hpp"
#include "f16_rows.hpp"
#include "f16_operands_ref.hpp"
#include "gpu_test_util.hpp"

namespace {

using gk::audio::F16Matrix;
using gk::audio::F16RowsParams;

// One launch over matrices of rows[i] x k floats (laid out one after another), as the operator's pass takes the
// activations and three weights of different row counts.
template <bool kTwoTerms>
void check(const std::vector<int64_t>& rows, int k) {
  int64_t total = 0;
  for (const int64_t r : rows) total += r;
  const std::vector<float> host =
      gk_testkit::f16_adversarial_rows(total, k, static_cast<uint32_t>(1000 * rows.size() + k));
  const size_t elems = size_t(total) * k;
  gk_testkit::DeviceBuffer src(elems * 4), hi(elems * 2), lo(elems * 2), exps(size_t(total) * 4);
  ASSERT_EQ(cudaMemcpy(src.get(), host.data(), elems * 4, cudaMemcpyHostToDevice), cudaSuccess);
  F16RowsParams p{};
  int64_t row0 = 0;
  for (size_t m = 0; m < rows.size(); ++m) {
    p.mat[m] = F16Matrix{src.as<float>() + row0 * k, rows[m], hi.as<uint16_t>() + row0 * k,
                         kTwoTerms ? lo.as<uint16_t>() + row0 * k : nullptr, exps.as<int32_t>() + row0};
    row0 += rows[m];
  }
  p.count = static_cast<int>(rows.size());
  p.k = k;
  const unsigned blocks = static_cast<unsigned>((total + gk::audio::kF16RowsWarps - 1) / gk::audio::kF16RowsWarps);
  gk::audio::f16_rows_kernel<kTwoTerms><<<blocks, gk::audio::kF16RowsWarps * 32>>>(p);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> h(elems), l(elems);
  std::vector<int32_t> e(total);
  ASSERT_EQ(cudaMemcpy(h.data(), hi.get(), elems * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(l.data(), lo.get(), elems * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(e.data(), exps.get(), size_t(total) * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  int64_t bad = 0;
  for (int64_t r = 0; r < total; ++r) {
    const float* x = host.data() + r * k;
    const int ref_e = gk_test::ref_scale_exponent(x, k);
    EXPECT_EQ(e[r], ref_e) << "row " << r;
    for (int i = 0; i < k; ++i) {
      uint16_t want_hi, want_lo = 0;
      if (kTwoTerms) {
        gk_test::ref_split(x[i], ref_e, &want_hi, &want_lo);
      } else {
        want_hi = gk_test::ref_tf32_f16(x[i], ref_e);
      }
      const size_t at = size_t(r) * k + i;
      if (!gk_test::ref_same_f16(h[at], want_hi) || (kTwoTerms && !gk_test::ref_same_f16(l[at], want_lo))) {
        if (++bad <= 5) {
          ADD_FAILURE() << (kTwoTerms ? "two terms" : "one term") << " row " << r << " col " << i << " x " << x[i]
                        << " (bits " << std::hex << *reinterpret_cast<const uint32_t*>(&x[i]) << ") e " << std::dec
                        << ref_e << ": got " << std::hex << h[at] << "/" << l[at] << ", want " << want_hi << "/"
                        << want_lo << std::dec;
        }
      }
    }
  }
  EXPECT_EQ(bad, 0) << "mismatching elements of " << total * k;
}

class F16RowsPass : public gk_test::GpuTest {};

// Rows held in registers (k <= 1024, whole and partial lanes), and rows of 2048 taking the second sweep.
TEST_F(F16RowsPass, OneTermMatchesTf32RoundingBitForBit) {
  check<false>({131, 96, 96, 96}, 1024);
  check<false>({131}, 36);
  check<false>({5, 40}, 2048);
}

TEST_F(F16RowsPass, TwoTermsMatchTheReferenceBitForBit) {
  check<true>({131, 96, 96, 96}, 1024);
  check<true>({131}, 36);
  check<true>({5, 40}, 2048);
}

}  // namespace
