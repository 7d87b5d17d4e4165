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

using gk::audio::F16RowsParams;

template <bool kTwoTerms>
void check(int count, int64_t rows, int k) {
  const int64_t total = count * rows;
  const std::vector<float> host = gk_testkit::f16_adversarial_rows(total, k, static_cast<uint32_t>(1000 * count + k));
  const size_t elems = size_t(total) * k;
  gk_testkit::DeviceBuffer src(elems * 4), hi(elems * 2), lo(elems * 2), exps(size_t(total) * 4);
  ASSERT_EQ(cudaMemcpy(src.get(), host.data(), elems * 4, cudaMemcpyHostToDevice), cudaSuccess);
  F16RowsParams p{};
  for (int m = 0; m < count; ++m) p.src[m] = src.as<float>() + m * rows * k;
  p.count = count;
  p.rows = rows;
  p.k = k;
  p.hi = hi.as<uint16_t>();
  p.lo = kTwoTerms ? lo.as<uint16_t>() : nullptr;
  p.exps = exps.as<int32_t>();
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

TEST_F(F16RowsPass, OneTermMatchesTf32RoundingBitForBit) {
  check<false>(3, 96, 1024);
  check<false>(1, 131, 36);
}

TEST_F(F16RowsPass, TwoTermsMatchTheReferenceBitForBit) {
  check<true>(3, 96, 1024);
  check<true>(1, 131, 36);
}

}  // namespace
