// The few-row projection kernel (src/projection/skinny_proj_gemm.cuh) launched directly, on the corners the layer
// tests reach only in part: every M from 1 to 16, K splits 1..8 over K ranges that do or do not share out evenly,
// both unit sizes, and destinations in packed rows or per head after each sequence's clamped cached length (lengths
// below zero and past the capacity included). Judged against a double-precision sum on the host; every output slot
// the kernel must not write starts as NaN and must stay NaN.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "gpu_test_util.hpp"
#include "projection/skinny_proj_gemm.cuh"

namespace {

using bf16 = __nv_bfloat16;
using gk::gemma3::SkinnyProjParams;

struct Case {
  int unit, m, k_chunks, split, seq_len;
  bool head_major;
};

std::string name(const Case& c) {
  return "unit " + std::to_string(c.unit) + " M " + std::to_string(c.m) + " K " + std::to_string(32 * c.k_chunks) +
         " split " + std::to_string(c.split) + " S " + std::to_string(c.seq_len) + (c.head_major ? " per head" : " packed");
}

template <int kUnit>
cudaError_t launch(const SkinnyProjParams& p, int units, int split) {
  using Tr = gk::gemma3::SkinnyProjTraits<kUnit>;
  const auto kernel =
      split > 1 ? gk::gemma3::skinny_proj_kernel<kUnit, true> : gk::gemma3::skinny_proj_kernel<kUnit, false>;
  // The weight ring is dynamic shared memory past 48 KB: this binary's own instance needs the opt-in.
  const cudaError_t opt = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (opt != cudaSuccess) return opt;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(units), 1, static_cast<unsigned>(split));
  cfg.blockDim = dim3(Tr::kThreads);
  cfg.dynamicSmemBytes = Tr::kSmemBytes;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = static_cast<unsigned>(split);
  cfg.attrs = &cluster;
  cfg.numAttrs = split > 1 ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, p);
}

// Mismatching output slots of one case (-1: the launch or a copy failed).
int run_case(const Case& c, std::mt19937& rng) {
  constexpr int kUnits = 3;
  const int K = 32 * c.k_chunks, N = kUnits * c.unit, batch = c.m / c.seq_len, capacity = c.seq_len + 5;
  std::uniform_real_distribution<float> value(-0.5f, 0.5f);
  std::uniform_int_distribution<int> length(-2, 6);
  std::vector<bf16> a(size_t(c.m) * K), w(size_t(N) * K);
  for (bf16& x : a) x = __float2bfloat16(value(rng));
  for (bf16& x : w) x = __float2bfloat16(value(rng));
  std::vector<int> lens(batch);
  for (int& l : lens) l = length(rng);
  const size_t out_elems = c.head_major ? size_t(batch) * kUnits * capacity * c.unit : size_t(c.m) * N;

  // Where row i, column n lands, and its expected value; NaN where nothing lands.
  std::vector<double> want(out_elems, NAN);
  for (int i = 0; i < c.m; ++i) {
    const int b = i / c.seq_len, t = i % c.seq_len;
    const int pos = t + std::max(0, std::min(lens[b], capacity - c.seq_len));
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k) {
        s += double(__bfloat162float(a[size_t(i) * K + k])) * __bfloat162float(w[size_t(n) * K + k]);
      }
      const int u = n / c.unit;
      const size_t at = c.head_major ? (size_t(b * kUnits + u) * capacity + pos) * c.unit + n % c.unit : size_t(i) * N + n;
      want[at] = s;
    }
  }

  gk_testkit::DeviceBuffer d_a(a.size() * 2), d_w(w.size() * 2), d_out(out_elems * 2), d_lens(lens.size() * 4);
  if (cudaMemcpy(d_a.get(), a.data(), a.size() * 2, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(d_w.get(), w.data(), w.size() * 2, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(d_lens.get(), lens.data(), lens.size() * 4, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemset(d_out.get(), 0xff, out_elems * 2) != cudaSuccess) {  // 0xffff: a bf16 NaN
    return -1;
  }
  SkinnyProjParams p{};
  p.a = static_cast<const bf16*>(d_a.get());
  p.a_row_stride = K;
  p.m = c.m;
  p.k_chunks = c.k_chunks;
  p.w[0] = static_cast<const bf16*>(d_w.get());
  p.seg_end[0] = p.seg_end[1] = p.seg_end[2] = kUnits;
  p.out[0] = static_cast<bf16*>(d_out.get());
  p.out_row_stride = N;
  p.head_major[0] = p.at_lens[0] = c.head_major;
  p.capacity[0] = capacity;
  p.seq_len = c.seq_len;
  p.lens = static_cast<const int*>(d_lens.get());
  const cudaError_t err = c.unit == 128 ? launch<128>(p, kUnits, c.split) : launch<256>(p, kUnits, c.split);
  std::vector<bf16> got(out_elems);
  if (err != cudaSuccess || cudaMemcpy(got.data(), d_out.get(), out_elems * 2, cudaMemcpyDeviceToHost) != cudaSuccess) {
    return -1;
  }
  int bad = 0;
  for (size_t x = 0; x < out_elems; ++x) {
    const float g = __bfloat162float(got[x]);
    const bool ok = std::isnan(want[x]) ? std::isnan(g) : std::fabs(g - want[x]) <= 0.02 + 0.01 * std::fabs(want[x]);
    bad += ok ? 0 : 1;
  }
  return bad;
}

class SkinnyProjKernel : public gk_test::GpuTest {};

TEST_F(SkinnyProjKernel, CornersAgainstADoubleSum) {
  std::mt19937 rng(23);
  int cases = 0;
  for (int m = 1; m <= 16; ++m) {
    for (const int split : {1, 2, 3, 5, 7, 8}) {
      for (const int k_chunks : {4 * split, 4 * split + 3, 37}) {
        const int seq_len = m % 3 != 0 ? (m % 2 != 0 ? 1 : 2) : 3;  // divides m
        const bool head_major = (m + split) % 2 != 0;
        for (const Case c : {Case{128, m, k_chunks, split, seq_len, head_major},
                             Case{256, m, k_chunks, split, seq_len, !head_major}}) {
          const int bad = run_case(c, rng);
          EXPECT_EQ(bad, 0) << name(c) << (bad < 0 ? ": launch or copy failed" : ": mismatching output slots");
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 16 * 6 * 3 * 2);
}

}  // namespace
