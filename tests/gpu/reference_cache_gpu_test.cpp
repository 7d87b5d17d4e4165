// The GPU reference with a key/value cache against the CPU one (the two share no code): the same small layer fed
// in chunks and as a ragged decode batch, outputs and cache contents compared (they differ only where fp32 and
// double accumulation round a bf16 value differently).
#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "fill.hpp"
#include "gpu_test_util.hpp"
#include "judge.hpp"
#include "reference.hpp"
#include "reference_gpu.hpp"

namespace {

using bf16 = __nv_bfloat16;
using gk_test::GpuTest;

constexpr int64_t kHidden = 64, kHq = 4, kHkv = 2, kD = 32;

using Rng = gk_testkit::NormalDraws;

struct DeviceCopy {
  bf16* p = nullptr;
  explicit DeviceCopy(const std::vector<float>& host) {
    std::vector<bf16> b(host.size());
    for (size_t i = 0; i < host.size(); ++i) b[i] = __float2bfloat16_rn(host[i]);
    if (cudaMalloc(reinterpret_cast<void**>(&p), b.size() * sizeof(bf16)) == cudaSuccess) {
      cudaMemcpy(p, b.data(), b.size() * sizeof(bf16), cudaMemcpyHostToDevice);
    }
  }
  ~DeviceCopy() { cudaFree(p); }
  std::vector<float> read(size_t n) const {
    std::vector<bf16> b(n);
    cudaMemcpy(b.data(), p, n * sizeof(bf16), cudaMemcpyDeviceToHost);
    std::vector<float> f(n);
    for (size_t i = 0; i < n; ++i) f[i] = __bfloat162float(b[i]);
    return f;
  }
};

// One call of both references on the same inputs and the same starting cache; compares outputs and caches.
// `starts` (optional): each sequence's first key (left padding).
void compare_call(int64_t batch, int64_t fresh, const std::vector<int64_t>& lens, int64_t max_len, int64_t window,
                  float softcap, std::vector<float>& cache_k, std::vector<float>& cache_v, Rng& rng,
                  const std::string& what, const std::vector<int64_t>& starts = {}) {
  const int64_t* first = starts.empty() ? nullptr : starts.data();
  const auto hs = rng(batch * fresh * kHidden, 1.f), cos = rng(batch * fresh * kD, 0.6f),
             sin = rng(batch * fresh * kD, 0.6f);
  const auto wq = rng(kHq * kD * kHidden, 0.125f), wk = rng(kHkv * kD * kHidden, 0.125f),
             wv = rng(kHkv * kD * kHidden, 0.125f), wo = rng(kHidden * kHq * kD, 0.09f),
             qn = rng(kD, 0.3f), kn = rng(kD, 0.3f);
  const gk_ref::Gemma3Dims dims{batch, fresh, kHidden, kHq, kHkv, kD, softcap, 1e-6f, 1.f, 0.f, gk_ref::Mask::kCausal,
                                window};
  // The GPU reference first, from the cache as it is now; then the CPU one updates the host copy.
  const DeviceCopy d_hs(hs), d_cos(cos), d_sin(sin), d_wq(wq), d_wk(wk), d_wv(wv), d_wo(wo), d_qn(qn), d_kn(kn),
      d_ck(cache_k), d_cv(cache_v), d_out(std::vector<float>(batch * fresh * kHidden, 0.f));
  const gk_ref_gpu::Gemma3DeviceInputs din{d_hs.p, d_cos.p, d_sin.p, nullptr, d_wq.p, d_wk.p, d_wv.p, d_wo.p,
                                           d_qn.p, d_kn.p};
  ASSERT_EQ(
      gk_ref_gpu::gemma3_attention_cached(dims, din, {d_ck.p, d_cv.p, max_len, lens.data(), first}, d_out.p, nullptr),
      cudaSuccess);
  std::vector<float> cpu_out(batch * fresh * kHidden);
  const gk_ref::Gemma3Inputs in{hs.data(), cos.data(), sin.data(), nullptr, wq.data(), wk.data(), wv.data(),
                                wo.data(), qn.data(), kn.data()};
  ASSERT_TRUE(gk_ref::gemma3_attention_cached(
      dims, in, {cache_k.data(), cache_v.data(), max_len, lens.data(), first}, cpu_out.data()));
  const auto gpu_out = d_out.read(cpu_out.size());
  const auto j = gk_testkit::judge_host(gpu_out.data(), cpu_out.data(), int64_t(cpu_out.size()), 3e-2, 3e-2);
  EXPECT_TRUE(j.passed(0.999)) << what << ": " << j.summary(0.999);
  for (const auto* pair : {&cache_k, &cache_v}) {
    const auto gpu_cache = (pair == &cache_k ? d_ck : d_cv).read(pair->size());
    const auto jc = gk_testkit::judge_host(gpu_cache.data(), pair->data(), int64_t(pair->size()), 3e-2, 3e-2);
    EXPECT_TRUE(jc.passed(0.999)) << what << " cache: " << jc.summary(0.999);
  }
}

class ReferenceCache : public GpuTest {};

TEST_F(ReferenceCache, GpuReferenceMatchesTheCpuOneChunkedAndRagged) {
  for (int64_t window : {0, 40}) {
    Rng rng{next_seed()};
    const int64_t max_len = 160;
    std::vector<float> k(2 * kHkv * max_len * kD, 0.f), v(k.size(), 0.f);
    // A prompt of 100 tokens in chunks of 70 and 30, then ragged decode steps of one token.
    std::vector<int64_t> lens = {0, 0};
    compare_call(2, 70, lens, max_len, window, 50.f, k, v, rng, "chunk 1");
    lens = {70, 70};
    compare_call(2, 30, lens, max_len, window, 50.f, k, v, rng, "chunk 2");
    lens = {100, 37};  // the second sequence's later tokens overwritten: a shorter history
    compare_call(2, 1, lens, max_len, window, 0.f, k, v, rng, "decode");
    lens = {159, 0};  // the cache filled to capacity
    compare_call(2, 1, lens, max_len, window, 0.f, k, v, rng, "decode at capacity");
  }
}

// Left padding: each sequence's keys before its first are hidden outright, and a query that then sees none (the
// first sequence's first 10 new tokens, all pad) gives zeros, on both references alike.
TEST_F(ReferenceCache, GpuReferenceMatchesTheCpuOneLeftPadded) {
  Rng rng{next_seed()};
  const int64_t max_len = 160;
  std::vector<float> k(2 * kHkv * max_len * kD, 0.f), v(k.size(), 0.f);
  compare_call(2, 70, {0, 0}, max_len, 0, 50.f, k, v, rng, "padded prefill", {10, 3});
  compare_call(2, 30, {70, 70}, max_len, 40, 0.f, k, v, rng, "padded chunk", {10, 3});
  compare_call(2, 1, {100, 100}, max_len, 0, 0.f, k, v, rng, "padded decode", {10, 3});
}

}  // namespace
