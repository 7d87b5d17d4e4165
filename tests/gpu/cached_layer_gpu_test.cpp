// The layer with a key/value cache against the CPU reference with one: a prompt fed in chunks and then ragged decode
// steps, on one cache, outputs judged with the official rule and against the precise yardstick, and the cache
// contents compared after every call. Three forms of the call: the fused layer (gk::gemma3_attention_forward_cached),
// the split calls with qkv writing the cache (gk::gemma3_qkv_forward, gk::gemma3_attend_forward), and qkv into plain
// outputs that the test copies into the cache itself, as a caller keeping its own cache does.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "fill.hpp"
#include "gpu_test_util.hpp"
#include "judge.hpp"
#include "reference.hpp"

namespace {

using bf16 = __nv_bfloat16;
using gk_test::GpuTest;

constexpr int64_t kHidden = 256, kHq = 4, kHkv = 2, kD = 128, kMaxLen = 320;

using Rng = gk_testkit::NormalDraws;

// A typed view of the testkit's device buffer.
template <class T>
struct Device {
  gk_testkit::DeviceBuffer buf;
  T* p;
  explicit Device(size_t count) : buf(count * sizeof(T)), p(buf.as<T>()) {}
};

void to_device(const std::vector<float>& f, Device<bf16>& d) {
  std::vector<bf16> b(f.size());
  for (size_t i = 0; i < f.size(); ++i) b[i] = __float2bfloat16_rn(f[i]);
  cudaMemcpy(d.p, b.data(), b.size() * sizeof(bf16), cudaMemcpyHostToDevice);
}
std::vector<float> to_host(const Device<bf16>& d, size_t n) {
  std::vector<bf16> b(n);
  cudaMemcpy(b.data(), d.p, n * sizeof(bf16), cudaMemcpyDeviceToHost);
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = __bfloat162float(b[i]);
  return f;
}

gk_tensor desc(void* p, gk_dtype t, std::vector<int64_t> shape) {
  return gk_tensor_contiguous(p, t, static_cast<int32_t>(shape.size()), shape.data());
}

// The layer's tensors for config c over device buffers (activations and output [B, S, ...], weights of c's shapes),
// and a cache of max_len tokens per sequence over k, v and the lengths.
struct LayerPointers {
  const bf16 *hs, *cos, *sin, *wq, *wk, *wv, *wo, *qn, *kn;
  bf16* out;
};
gk_gemma3_attention_tensors layer_tensors(const gk_gemma3_attention_config& c, const LayerPointers& p) {
  const int64_t B = c.batch, S = c.seq_len, D = c.head_dim, H = c.hidden;
  const auto t = [](const bf16* ptr, std::vector<int64_t> shape) {
    return desc(const_cast<bf16*>(ptr), GK_DTYPE_BF16, std::move(shape));
  };
  gk_gemma3_attention_tensors l{};
  l.hidden_states = t(p.hs, {B, S, H});
  l.cos = t(p.cos, {B, S, D});
  l.sin = t(p.sin, {B, S, D});
  l.q_proj_weight = t(p.wq, {c.num_q_heads * D, H});
  l.k_proj_weight = t(p.wk, {c.num_kv_heads * D, H});
  l.v_proj_weight = t(p.wv, {c.num_kv_heads * D, H});
  l.o_proj_weight = t(p.wo, {H, c.num_q_heads * D});
  l.q_norm_weight = t(p.qn, {D});
  l.k_norm_weight = t(p.kn, {D});
  l.out = t(p.out, {B, S, H});
  return l;
}
gk_kv_cache kv_cache(const gk_gemma3_attention_config& c, bf16* k, bf16* v, int* lens, int64_t max_len,
                     int64_t max_cached) {
  gk_kv_cache cache{};
  cache.k_cache = desc(k, GK_DTYPE_BF16, {c.batch, c.num_kv_heads, max_len, c.head_dim});
  cache.v_cache = desc(v, GK_DTYPE_BF16, {c.batch, c.num_kv_heads, max_len, c.head_dim});
  cache.cache_seqlens = desc(lens, GK_DTYPE_I32, {c.batch});
  cache.max_cached = max_cached;
  return cache;
}

class CachedLayer : public GpuTest {};

enum class Form { kFused, kSplitIntoCache, kSplitOutputs };

// One configuration through five calls on one cache. `v_first`: v's weights lie before k's in one allocation (the
// layer then packs v's columns before k's).
void run_calls(cudaStream_t stream, gk_handle_t handle, uint64_t seed, gk_mask_mode mode, int64_t window, float softcap,
               bool v_first, Form form = Form::kFused) {
  Rng rng{seed};
  const int64_t B = 2, kv_w = kHkv * kD * kHidden;
  const auto wq = rng(kHq * kD * kHidden, 0.0625f), wk = rng(kv_w, 0.0625f), wv = rng(kv_w, 0.0625f),
             wo = rng(kHidden * kHq * kD, 0.044f), qn = rng(kD, 0.3f), kn = rng(kD, 0.3f);
  Device<bf16> d_wq(wq.size()), d_kv(2 * kv_w), d_wo(wo.size()), d_qn(kD), d_kn(kD);
  std::vector<float> kv(v_first ? wv : wk);
  kv.insert(kv.end(), (v_first ? wk : wv).begin(), (v_first ? wk : wv).end());
  to_device(wq, d_wq), to_device(kv, d_kv), to_device(wo, d_wo), to_device(qn, d_qn), to_device(kn, d_kn);
  bf16* const d_wk = d_kv.p + (v_first ? kv_w : 0);
  bf16* const d_wv = d_kv.p + (v_first ? 0 : kv_w);
  const size_t cache_n = size_t(B * kHkv * kMaxLen * kD);
  // Slots no call has written hold +Inf: no call may read them (a probability 0 times Inf is NaN).
  std::vector<float> k_ref(cache_n, INFINITY), v_ref(cache_n, INFINITY);
  Device<bf16> d_k(cache_n), d_v(cache_n);
  to_device(k_ref, d_k), to_device(v_ref, d_v);
  Device<int> d_lens(B);
  // (new tokens, cached lengths): a 200-token prompt in chunks of 130 and 70, decode steps, one sequence restarted
  // shorter.
  const std::vector<std::pair<int64_t, std::vector<int64_t>>> calls = {
      {130, {0, 0}}, {70, {130, 130}}, {1, {200, 200}}, {1, {201, 37}}, {3, {202, 38}}};
  for (const auto& [S, lens] : calls) {
    const std::string what = "mode " + std::to_string(int(mode)) + " window " + std::to_string(window) + " softcap " +
                             std::to_string(softcap) + (v_first ? " v-first" : "") + " S " + std::to_string(S) +
                             " lens " + std::to_string(lens[0]) + "," + std::to_string(lens[1]) + " form " +
                             std::to_string(int(form));
    const auto hs = rng(B * S * kHidden, 1.f), cos = rng(B * S * kD, 0.6f),
               sin = rng(B * S * kD, 0.6f);
    Device<bf16> d_hs(hs.size()), d_cos(cos.size()), d_sin(sin.size()), d_out(B * S * kHidden);
    to_device(hs, d_hs), to_device(cos, d_cos), to_device(sin, d_sin);
    const std::vector<int> lens32(lens.begin(), lens.end());
    ASSERT_EQ(cudaMemcpyAsync(d_lens.p, lens32.data(), B * sizeof(int), cudaMemcpyHostToDevice, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

    gk_gemma3_attention_config c{B, S, kHidden, kHq, kHkv, kD, softcap, 1e-6f, 1.f, 0.f, mode, window};
    const gk_gemma3_attention_tensors t =
        layer_tensors(c, {d_hs.p, d_cos.p, d_sin.p, d_wq.p, d_wk, d_wv, d_wo.p, d_qn.p, d_kn.p, d_out.p});
    const gk_kv_cache cache = kv_cache(c, d_k.p, d_v.p, d_lens.p, kMaxLen, std::max(lens[0], lens[1]));
    size_t ws_bytes = 0, qkv_bytes = 0, attend_bytes = 0;
    GK_ASSERT_OK(gk::gemma3_attention_workspace_size(c, &ws_bytes));
    GK_ASSERT_OK(gk::gemma3_qkv_workspace_size(c, &qkv_bytes));
    GK_ASSERT_OK(gk::gemma3_attend_workspace_size(c, &attend_bytes));
    ws_bytes = std::max({ws_bytes, qkv_bytes, attend_bytes});
    gk_testkit::DeviceBuffer ws(ws_bytes);  // cudaMalloc's alignment is the 256 bytes the calls want
    void* const ws_ptr = ws.get();
    const auto k_before = to_host(d_k, cache_n), v_before = to_host(d_v, cache_n);
    Device<bf16> d_q(B * kHq * S * kD), d_knew(B * kHkv * S * kD), d_vnew(B * kHkv * S * kD);
    const gk_gemma3_qkv_tensors qt{t.hidden_states, t.cos, t.sin, t.q_proj_weight, t.k_proj_weight, t.v_proj_weight,
                                   t.q_norm_weight, t.k_norm_weight, desc(d_q.p, GK_DTYPE_BF16, {B, kHq, S, kD}),
                                   desc(d_knew.p, GK_DTYPE_BF16, {B, kHkv, S, kD}),
                                   desc(d_vnew.p, GK_DTYPE_BF16, {B, kHkv, S, kD})};
    const gk_gemma3_attend_tensors at{qt.q_out, t.o_proj_weight, t.out};
    switch (form) {
      case Form::kFused:
        GK_ASSERT_OK(gk::gemma3_attention_forward_cached(handle, c, t, cache, ws_ptr, ws_bytes, stream));
        break;
      case Form::kSplitIntoCache:
        GK_ASSERT_OK(gk::gemma3_qkv_forward(handle, c, qt, &cache, ws_ptr, ws_bytes, stream));
        GK_ASSERT_OK(gk::gemma3_attend_forward(handle, c, at, cache, ws_ptr, ws_bytes, stream));
        break;
      case Form::kSplitOutputs:
        GK_ASSERT_OK(gk::gemma3_qkv_forward(handle, c, qt, nullptr, ws_ptr, ws_bytes, stream));
        for (int64_t b = 0; b < B; ++b) {  // the caller's own cache update: S rows per head after lens[b]
          for (int64_t h = 0; h < kHkv; ++h) {
            const size_t src = size_t((b * kHkv + h) * S * kD), dst = size_t(((b * kHkv + h) * kMaxLen + lens[b]) * kD);
            ASSERT_EQ(cudaMemcpyAsync(d_k.p + dst, d_knew.p + src, S * kD * sizeof(bf16), cudaMemcpyDeviceToDevice,
                                      stream), cudaSuccess);
            ASSERT_EQ(cudaMemcpyAsync(d_v.p + dst, d_vnew.p + src, S * kD * sizeof(bf16), cudaMemcpyDeviceToDevice,
                                      stream), cudaSuccess);
          }
        }
        GK_ASSERT_OK(gk::gemma3_attend_forward(handle, c, at, cache, ws_ptr, ws_bytes, stream));
        break;
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << what;

    gk_ref::Gemma3Dims dims{B, S, kHidden, kHq, kHkv, kD, softcap, 1e-6f, 1.f, 0.f,
                            mode == GK_MASK_NONE ? gk_ref::Mask::kNone : gk_ref::Mask::kCausal, window};
    const gk_ref::Gemma3Inputs in{hs.data(), cos.data(), sin.data(), nullptr, wq.data(), wk.data(), wv.data(),
                                  wo.data(), qn.data(), kn.data()};
    // The official yardstick, and the precise one (scores kept in fp32), on copies of the same cache.
    std::vector<float> ref(B * S * kHidden), precise(B * S * kHidden);
    auto k_precise = k_ref, v_precise = v_ref;
    gk_ref::Gemma3Dims precise_dims = dims;
    precise_dims.fp32_scores = true;
    ASSERT_TRUE(gk_ref::gemma3_attention_cached(precise_dims, in,
                                                {k_precise.data(), v_precise.data(), kMaxLen, lens.data()},
                                                precise.data()));
    ASSERT_TRUE(gk_ref::gemma3_attention_cached(dims, in, {k_ref.data(), v_ref.data(), kMaxLen, lens.data()},
                                                ref.data()));
    const auto out = to_host(d_out, ref.size());
    const auto j = gk_testkit::judge_host(out.data(), ref.data(), int64_t(ref.size()), 0.05, 0.05);
    gk_test::report("047-cached " + what, seed, j, 0.99);
    EXPECT_TRUE(j.passed(0.99)) << what << ": " << j.summary(0.99);
    EXPECT_EQ(j.non_finite, 0) << what;
    // A key more or less at a window's edge moves rows by ~2e-2 relative L2; rounding alone stays near 5e-3.
    const auto jp = gk_testkit::judge_host(out.data(), precise.data(), int64_t(precise.size()), 0.05, 0.05);
    EXPECT_LT(jp.rel_l2(), 5e-3) << what << " (precise yardstick): " << jp.summary(0.99);
    // The caches: the slots this call wrote hold the reference's k and v within a bf16 step, every other slot is
    // bit for bit what it was.
    for (int which = 0; which < 2; ++which) {
      const auto got = to_host(which == 0 ? d_k : d_v, cache_n);
      const auto& want = which == 0 ? k_ref : v_ref;
      const auto& before = which == 0 ? k_before : v_before;
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t h = 0; h < kHkv; ++h) {
          for (int64_t pos = 0; pos < kMaxLen; ++pos) {
            const bool written = pos >= lens[b] && pos < lens[b] + S;
            for (int64_t e = 0; e < kD; ++e) {
              const size_t i = size_t(((b * kHkv + h) * kMaxLen + pos) * kD + e);
              if (written) {
                ASSERT_LE(std::fabs(got[i] - want[i]), 2e-2 + 2e-2 * std::fabs(want[i]))
                    << what << (which ? " v" : " k") << " cache b " << b << " h " << h << " pos " << pos;
              } else {
                ASSERT_EQ(got[i], before[i]) << what << (which ? " v" : " k") << " cache b " << b << " pos " << pos;
              }
            }
          }
        }
      }
    }
  }
}

TEST_F(CachedLayer, ChunkedPrefillAndRaggedDecodeMatchTheCpuReference) {
  // Causal, a window that ends inside the cached tokens, one that covers everything (the causal mask), no mask;
  // with and without a softcap; both packed column orders.
  run_calls(stream(), handle(), next_seed(), GK_MASK_CAUSAL, 0, 50.f, false);
  run_calls(stream(), handle(), next_seed(), GK_MASK_CAUSAL, 100, 0.f, false);
  run_calls(stream(), handle(), next_seed(), GK_MASK_CAUSAL, 100, 50.f, true);
  run_calls(stream(), handle(), next_seed(), GK_MASK_CAUSAL, 400, 0.f, true);
  run_calls(stream(), handle(), next_seed(), GK_MASK_NONE, 0, 50.f, false);
}

TEST_F(CachedLayer, SplitCallsMatchTheCpuReference) {
  for (Form form : {Form::kSplitIntoCache, Form::kSplitOutputs}) {
    run_calls(stream(), handle(), next_seed(), GK_MASK_CAUSAL, 0, 50.f, false, form);
    run_calls(stream(), handle(), next_seed(), GK_MASK_CAUSAL, 100, 0.f, true, form);
    run_calls(stream(), handle(), next_seed(), GK_MASK_NONE, 0, 0.f, false, form);
  }
}

// The same calls with the Hopper kernel pinned: its cached form takes the chunks (130 and 70 new tokens after 0 and
// 130 cached) of the fused layer and of gemma3_attend (whose query is head-major), causal and with a window.
TEST_F(CachedLayer, HopperKernelChunksMatchTheCpuReference) {
  GK_ASSERT_OK(gk::set_overrides(handle(), "attention.kernel=sm90"));
  for (Form form : {Form::kFused, Form::kSplitIntoCache, Form::kSplitOutputs}) {
    run_calls(stream(), handle(), next_seed(), GK_MASK_CAUSAL, 0, 50.f, false, form);
    run_calls(stream(), handle(), next_seed(), GK_MASK_CAUSAL, 100, 0.f, true, form);
  }
  GK_ASSERT_OK(gk::set_overrides(handle(), ""));
}

}  // namespace

namespace {

// The decode kernel's cases: ragged lengths (0, 1 and 4097 cached), the longest sequence filling the cache exactly,
// new-token counts 1, 5 and 16 (one to several 16-row blocks of a group's rows), every group size 1..8, softcap on
// and off, a window; the cache filled with random keys and values directly. The fused layer against the CPU
// reference, judged as above; with the sm80 kernel pinned the same call runs the prefill kernel's cached form.
// Longer calls (chunked prefill) run the prefill kernels' cached forms, each pinned in turn. `tail`: what the
// cache's slots past each sequence's new tokens hold, which no call may read (a probability 0 times Inf or NaN is
// NaN): random values, +Inf in k and v, or NaN in k or in v alone. `longest`: the third sequence's cached length.
enum class Tail { kRandom, kInf, kNanK, kNanV };
void run_decode(cudaStream_t stream, gk_handle_t handle, uint64_t seed, int64_t group, int64_t S, float softcap,
                int64_t window, int64_t D = kD, bool padded = false, Tail tail = Tail::kRandom,
                int64_t longest = 4097) {
  Rng rng{seed};
  const int64_t B = 3, Hkv = 1, Hq = group, hidden = 256, max_len = longest + S;
  const std::vector<int64_t> lens = {0, 1, longest};
  const char* const tails[] = {"", "inf-tail ", "nan-k-tail ", "nan-v-tail "};
  const std::string what = std::string(padded ? "padded " : "") + tails[int(tail)] + "decode D " +
                           std::to_string(D) + " group " +
                           std::to_string(group) + " S " + std::to_string(S) + " softcap " +
                           std::to_string(softcap) + " window " + std::to_string(window);
  const auto wq = rng(Hq * D * hidden, 0.0625f), wk = rng(Hkv * D * hidden, 0.0625f),
             wv = rng(Hkv * D * hidden, 0.0625f), wo = rng(hidden * Hq * D, 0.044f), qn = rng(D, 0.3f),
             kn = rng(D, 0.3f), hs = rng(B * S * hidden, 1.f), cos = rng(B * S * D, 0.6f), sin = rng(B * S * D, 0.6f);
  const size_t cache_n = size_t(B * Hkv * max_len * D);
  std::vector<float> k_ref = rng(cache_n, 1.f), v_ref = rng(cache_n, 1.f);
  if (tail != Tail::kRandom) {
    for (int64_t b = 0; b < B; ++b) {
      const size_t from = size_t((b * max_len + lens[size_t(b)] + S) * D), to = size_t((b + 1) * max_len * D);
      if (tail != Tail::kNanV) std::fill(k_ref.begin() + from, k_ref.begin() + to, tail == Tail::kInf ? INFINITY : NAN);
      if (tail != Tail::kNanK) std::fill(v_ref.begin() + from, v_ref.begin() + to, tail == Tail::kInf ? INFINITY : NAN);
    }
  }
  Device<bf16> d_wq(wq.size()), d_wk(wk.size()), d_wv(wv.size()), d_wo(wo.size()), d_qn(D), d_kn(D),
      d_hs(hs.size()), d_cos(cos.size()), d_sin(sin.size()), d_out(B * S * hidden), d_k(cache_n), d_v(cache_n);
  for (auto [h, d] : {std::pair{&wq, &d_wq}, {&wk, &d_wk}, {&wv, &d_wv}, {&wo, &d_wo}, {&qn, &d_qn}, {&kn, &d_kn},
                      {&hs, &d_hs}, {&cos, &d_cos}, {&sin, &d_sin}, {&k_ref, &d_k}, {&v_ref, &d_v}}) {
    to_device(*h, *d);
  }
  // The reference reads what the device holds: the random cache rounded to bf16.
  k_ref = to_host(d_k, cache_n);
  v_ref = to_host(d_v, cache_n);
  Device<int> d_lens(B);
  const std::vector<int> lens32(lens.begin(), lens.end());
  ASSERT_EQ(cudaMemcpy(d_lens.p, lens32.data(), B * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);

  gk_gemma3_attention_config c{B, S, hidden, Hq, Hkv, D, softcap, 1e-6f, 1.f, 0.f, GK_MASK_CAUSAL, window};
  const gk_gemma3_attention_tensors t =
      layer_tensors(c, {d_hs.p, d_cos.p, d_sin.p, d_wq.p, d_wk.p, d_wv.p, d_wo.p, d_qn.p, d_kn.p, d_out.p});
  gk_kv_cache cache = kv_cache(c, d_k.p, d_v.p, d_lens.p, max_len, longest);
  // Left padding: sequence 0's first 5 keys (past its new tokens where S < 5: its queries then see nothing), 1's
  // one cached key, 2's first 2000.
  const std::vector<int64_t> starts = {5, 1, 2000};
  Device<int> d_starts(B);
  if (padded) {
    const std::vector<int> starts32(starts.begin(), starts.end());
    ASSERT_EQ(cudaMemcpy(d_starts.p, starts32.data(), B * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
    cache.cache_starts = desc(d_starts.p, GK_DTYPE_I32, {B});
  }

  gk_ref::Gemma3Dims dims{B, S, hidden, Hq, Hkv, D, softcap, 1e-6f, 1.f, 0.f, gk_ref::Mask::kCausal, window};
  const gk_ref::Gemma3Inputs in{hs.data(), cos.data(), sin.data(), nullptr, wq.data(), wk.data(), wv.data(),
                                wo.data(), qn.data(), kn.data()};
  std::vector<float> ref(B * S * hidden);
  ASSERT_TRUE(gk_ref::gemma3_attention_cached(
      dims, in, {k_ref.data(), v_ref.data(), max_len, lens.data(), padded ? starts.data() : nullptr}, ref.data()));
  size_t ws_bytes = 0;
  GK_ASSERT_OK(gk::gemma3_attention_workspace_size(c, &ws_bytes));
  gk_testkit::DeviceBuffer ws(ws_bytes);
  void* const ws_ptr = ws.get();
  for (const char* pin : {"", "attention.kernel=sm80", "attention.kernel=sm90"}) {
    GK_ASSERT_OK(gk::set_overrides(handle, pin));
    // The call writes the same new k and v into the same slots each time.
    GK_ASSERT_OK(gk::gemma3_attention_forward_cached(handle, c, t, cache, ws_ptr, ws_bytes, stream));
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << what << " " << pin;
    const auto out = to_host(d_out, ref.size());
    const auto j = gk_testkit::judge_host(out.data(), ref.data(), int64_t(ref.size()), 0.05, 0.05);
    gk_test::report("047-decode " + what + " " + pin, seed, j, 0.99);
    EXPECT_TRUE(j.passed(0.99)) << what << " " << pin << ": " << j.summary(0.99);
    EXPECT_EQ(j.non_finite, 0) << what << " " << pin;
    EXPECT_LT(j.rel_l2(), 2e-2) << what << " " << pin << ": " << j.summary(0.99);
  }
  GK_ASSERT_OK(gk::set_overrides(handle, ""));
}

class DecodeAttention : public GpuTest {};

TEST_F(DecodeAttention, RaggedCachesEveryGroupSizeMatchTheCpuReference) {
  for (int64_t group = 1; group <= 8; ++group) {
    const int64_t S = group % 3 == 0 ? 5 : group % 2 ? 1 : 16;
    run_decode(stream(), handle(), next_seed(), group, S, group % 2 ? 50.f : 0.f, group == 3 ? 1024 : 0);
  }
  run_decode(stream(), handle(), next_seed(), 8, 16, 50.f, 100);  // eight row blocks, a window inside the cache
  run_decode(stream(), handle(), next_seed(), 2, 1, 0.f, 1);  // a window of one key: each query sees itself
  // head_dim 256 (Gemma3 1B/4B/12B): the 1B's group of 4 and the 4B/12B's of 2.
  run_decode(stream(), handle(), next_seed(), 4, 1, 0.f, 512, 256);
  run_decode(stream(), handle(), next_seed(), 2, 16, 0.f, 0, 256);
  run_decode(stream(), handle(), next_seed(), 2, 5, 50.f, 1024, 256);
}

// Chunked prefill: a chunk of 300 or 130 new tokens (several 128-row query blocks, the last partial) after ragged
// cached lengths, on every prefill kernel's cached form; the sm90 kernel's cached positions start off its tile grid
// (1 and 4097 cached), and past the new tokens the cache holds Inf (or NaN in k or v alone).
TEST_F(DecodeAttention, ChunkedPrefillOnEveryKernelMatchesTheCpuReference) {
  run_decode(stream(), handle(), next_seed(), 2, 300, 50.f, 0, kD, false, Tail::kInf);
  run_decode(stream(), handle(), next_seed(), 3, 130, 0.f, 100, kD, false, Tail::kInf);
  run_decode(stream(), handle(), next_seed(), 1, 300, 0.f, 1024, kD, false, Tail::kInf);
  run_decode(stream(), handle(), next_seed(), 2, 130, 0.f, 0, 256, false, Tail::kInf);
  run_decode(stream(), handle(), next_seed(), 4, 300, 50.f, 512, 256, false, Tail::kInf);
  run_decode(stream(), handle(), next_seed(), 2, 300, 0.f, 0, kD, false, Tail::kNanK);  // masking replaces the scores
  run_decode(stream(), handle(), next_seed(), 2, 300, 0.f, 0, kD, false, Tail::kNanV);  // the V rows' zeroing
  run_decode(stream(), handle(), next_seed(), 2, 1, 0.f, 0, kD, false, Tail::kInf);  // decode over the same tails
  // Left padding (pad keys 5, 1 and 2000; the first sequence's first 5 queries see nothing and give zeros).
  run_decode(stream(), handle(), next_seed(), 2, 130, 0.f, 0, kD, /*padded=*/true, Tail::kInf);
  run_decode(stream(), handle(), next_seed(), 2, 300, 50.f, 1024, 256, /*padded=*/true, Tail::kNanV);
  // Keys ending one past a 128-key tile (the diagonal tile's first key is its only real one) and on a tile edge (no
  // rows to zero): 128 + 1 and 128 + 128 new tokens after 0 cached (the first sequence).
  run_decode(stream(), handle(), next_seed(), 2, 129, 0.f, 0, kD, false, Tail::kNanV);
  run_decode(stream(), handle(), next_seed(), 2, 256, 0.f, 0, kD, false, Tail::kNanV);
  // More work tiles than SMs (6 query blocks x 3 sequences x 8 heads = 144): CTAs take a second tile, whose V rows
  // are zeroed in a later ring stage, after the first tile's turns and output.
  run_decode(stream(), handle(), next_seed(), 8, 700, 0.f, 0, kD, false, Tail::kNanV, 600);
  run_decode(stream(), handle(), next_seed(), 8, 700, 50.f, 256, 256, false, Tail::kNanV, 600);
}

TEST_F(DecodeAttention, LeftPaddedSequencesHideTheirPadKeys) {
  run_decode(stream(), handle(), next_seed(), 3, 1, 50.f, 0, kD, /*padded=*/true);
  run_decode(stream(), handle(), next_seed(), 3, 16, 0.f, 0, kD, true);  // pad queries see nothing: zeros
  run_decode(stream(), handle(), next_seed(), 2, 5, 0.f, 1024, kD, true);
  run_decode(stream(), handle(), next_seed(), 4, 1, 0.f, 512, 256, true);
}

}  // namespace
