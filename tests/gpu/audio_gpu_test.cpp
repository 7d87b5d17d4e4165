// The audio QKV operator on the GPU, both precision modes, against the fp64 references.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "env_overrides.hpp"
#include "gpu_test_util.hpp"
#include "problems.hpp"
#include "suites.hpp"

namespace {

using gk_test::GpuParamTest;
using gk_testkit::AudioProblem;
using gk_testkit::AudioRecipe;

constexpr int kSuiteRounds = 3;
const char* const kNames[3] = {"q", "k", "v"};

std::string mode_name(gk_precision p) { return p == GK_PRECISION_TF32 ? "tf32" : "exact"; }

struct SuiteCase {
  int workload;
  gk_precision precision;
};

void PrintTo(const SuiteCase& c, std::ostream* os) { *os << "workload " << c.workload << " " << mode_name(c.precision); }

class AudioSuite : public GpuParamTest<SuiteCase> {};

TEST_P(AudioSuite, OfficialRuleAgainstFp64Reference) {
  const auto& suite = gk_testkit::builtin_suite("054");
  const auto& w = suite.workloads.at(GetParam().workload);
  AudioProblem p(gk_testkit::audio_config(suite, w, GetParam().precision));
  for (int round = 0; round < kSuiteRounds; ++round) {
    AudioRecipe r;
    r.seed = next_seed();
    GK_ASSERT_OK(p.run_fresh(r, handle(), stream()));
    p.run_gpu_reference(stream());
    const auto js = p.judge(w.atol, w.rtol, stream());
    for (int i = 0; i < 3; ++i) {
      gk_test::report("054 " + mode_name(GetParam().precision) + " B" + std::to_string(w.batch) + " S" +
                          std::to_string(w.seq_len) + " " + kNames[i],
                      r.seed, js[i], suite.required_matched_ratio);
      EXPECT_TRUE(js[i].passed(suite.required_matched_ratio)) << kNames[i] << ": " << js[i].summary(0.99);
      if (GetParam().precision == GK_PRECISION_EXACT) {
        // fp32-level: relative L2 error near fp32 rounding of a 1024-term dot product.
        EXPECT_LT(js[i].rel_l2(), 1e-6) << kNames[i] << ": " << js[i].summary(0.99);
      } else {
        EXPECT_LT(js[i].rel_l2(), 2e-3) << kNames[i] << ": " << js[i].summary(0.99);
      }
    }
  }
}

std::vector<SuiteCase> suite_cases() {
  std::vector<SuiteCase> v;
  for (gk_precision p : {GK_PRECISION_TF32, GK_PRECISION_EXACT})
    for (int i = 0; i < 16; ++i) v.push_back({i, p});
  return v;
}

INSTANTIATE_TEST_SUITE_P(W054, AudioSuite, ::testing::ValuesIn(suite_cases()), [](const auto& info) {
  const auto& w = gk_testkit::builtin_suite("054").workloads.at(info.param.workload);
  return mode_name(info.param.precision) + "_B" + std::to_string(w.batch) + "_S" + std::to_string(w.seq_len);
});

struct Variant {
  const char* name;
  gk_audio_qkv_config config;
  AudioRecipe recipe;
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

class AudioVariants : public GpuParamTest<Variant> {};

TEST_P(AudioVariants, OfficialRuleAgainstFp64Reference) {
  const Variant& v = GetParam();
  AudioProblem p(v.config);
  AudioRecipe r = v.recipe;
  r.seed = next_seed();
  GK_ASSERT_OK(p.run_fresh(r, handle(), stream()));
  p.run_gpu_reference(stream());
  // Activations scale v (not the normalized q, k): judge with a scaled atol.
  const auto js = p.judge(0.002 * r.activation_scale, 1e-5, stream());
  for (int i = 0; i < 3; ++i) {
    gk_test::report(std::string("054-variant ") + v.name + " " + kNames[i], r.seed, js[i], 0.99);
    EXPECT_TRUE(js[i].passed(0.99)) << kNames[i] << ": " << js[i].summary(0.99);
  }
}

std::vector<Variant> variants() {
  const gk_audio_qkv_config base{3, 131, 1024, 8, 128, 1e-6f, GK_PRECISION_TF32};
  auto exact = base;
  exact.precision = GK_PRECISION_EXACT;
  auto odd = base;
  odd.batch = 1;
  odd.seq_len = 1;
  odd.hidden = 192;
  odd.num_heads = 3;
  auto exact_odd = odd;
  exact_odd.precision = GK_PRECISION_EXACT;
  AudioRecipe big;
  big.activation_scale = 30.f;
  big.norm_weight_spread = 2.f;
  return {{"tf32_large_activations", base, big},
          {"exact_large_activations", exact, big},
          {"tf32_s1_hidden192_heads3", odd, {}},
          // hidden 192 = 6 K-blocks, split 2 over a cluster: an odd count per CTA in the fused kernels.
          {"exact_s1_hidden192_heads3", exact_odd, {}},
          {"tf32_s17", {1, 17, 1024, 8, 128, 1e-6f, GK_PRECISION_TF32}, {}}};
}

INSTANTIATE_TEST_SUITE_P(Variants, AudioVariants, ::testing::ValuesIn(variants()),
                         [](const auto& info) { return std::string(info.param.name); });

class AudioSmall : public GpuParamTest<gk_precision> {};

TEST_P(AudioSmall, GpuReferenceAndFastPathAgainstCpuReference) {
  AudioProblem p({2, 19, 128, 2, 128, 1e-6f, GetParam()});
  AudioRecipe r;
  r.seed = next_seed();
  r.norm_weight_spread = 0.5f;
  GK_ASSERT_OK(p.run_fresh(r, handle(), stream()));
  p.run_gpu_reference(stream());
  const auto vs_gpu = p.judge(0.002, 1e-5, stream());
  p.run_cpu_reference(stream());
  const auto vs_cpu = p.judge(0.002, 1e-5, stream());
  for (int i = 0; i < 3; ++i) {
    gk_test::report("054-small " + mode_name(GetParam()) + " " + kNames[i], r.seed, vs_cpu[i], 0.99);
    EXPECT_TRUE(vs_cpu[i].passed(0.99)) << vs_cpu[i].summary(0.99);
    // Both references are fp64: the fast path's error against each is the same to many digits.
    EXPECT_NEAR(vs_gpu[i].rel_l2(), vs_cpu[i].rel_l2(), 1e-9 + 1e-6 * vs_cpu[i].rel_l2());
    EXPECT_NEAR(vs_gpu[i].max_abs_err, vs_cpu[i].max_abs_err, 1e-9);
  }
}

INSTANTIATE_TEST_SUITE_P(Small, AudioSmall, ::testing::Values(GK_PRECISION_TF32, GK_PRECISION_EXACT),
                         [](const auto& info) { return mode_name(info.param); });

// Exact mode against plain fp32 cuBLAS SGEMM, both judged against the fp64 truth on v (the un-normalized
// projection, so the comparison is GEMM against GEMM): within 2x of cuBLAS's relative L2 and max error. The bar any
// faster exact path (3xTF32) must clear.
class AudioExactVsFp32 : public GpuParamTest<std::pair<int64_t, int64_t>> {};
class AudioExactAdversarial : public gk_test::GpuTest {};

// The exact mode's error against plain fp32 cuBLAS's on v, under the handle's pins `spec` (then restored).
void exact_vs_fp32(gk_handle_t handle, cudaStream_t stream, int64_t batch, int64_t seq_len, uint64_t seed,
                   const char* spec) {
  GK_ASSERT_OK(gk::set_overrides(handle, spec));
  AudioProblem p({batch, seq_len, 1024, 8, 128, 1e-6f, GK_PRECISION_EXACT});
  AudioRecipe r;
  r.seed = seed;
  const gk::Status run = p.run_fresh(r, handle, stream);
  (void)gk_testkit::apply_env_overrides(handle);
  GK_ASSERT_OK(run);
  p.run_gpu_reference(stream);
  const gk_testkit::Judgement exact = p.judge(0.002, 1e-5, stream)[2];
  p.run_cublas_fp32_v(stream);
  const gk_testkit::Judgement fp32 = p.judge(0.002, 1e-5, stream)[2];
  const std::string shape = std::string(spec) + " B" + std::to_string(batch) + " S" + std::to_string(seq_len);
  gk_test::report("054 exact v " + shape, r.seed, exact, 0.99);
  gk_test::report("054 cuBLAS fp32 v " + shape, r.seed, fp32, 0.99);
  EXPECT_GT(fp32.rel_l2(), 0.0);
  EXPECT_LE(exact.rel_l2(), 2.0 * fp32.rel_l2()) << "exact " << exact.summary(0.99) << "; fp32 " << fp32.summary(0.99);
  EXPECT_LE(exact.max_abs_err, 2.0 * fp32.max_abs_err) << "exact " << exact.summary(0.99);
}

// Both exact forms held to the bound on every 054 workload: two fp16 terms (the default past 128 rows) and 3xTF32.
TEST_P(AudioExactVsFp32, TwoFp16TermsWithinTwiceFp32CublasError) {
  const auto [batch, seq_len] = GetParam();
  exact_vs_fp32(handle(), stream(), batch, seq_len, next_seed(), "audio.exact=f16");
}

TEST_P(AudioExactVsFp32, Tf32x3WithinTwiceFp32CublasError) {
  const auto [batch, seq_len] = GetParam();
  exact_vs_fp32(handle(), stream(), batch, seq_len, next_seed(), "audio.exact=tf32x3");
}

// Adversarial magnitudes: each activation row and each weight row (output feature) scaled by its own power of two,
// 2^-24 .. 2^24 (rows 2^48 apart in one call; tiny and huge weight columns side by side): both exact forms finite
// and within 2x of fp32 SGEMM's relative L2 and max error on v against the fp64 truth (the metrics the large outputs
// dominate; an fp16 range error there would show as Inf or a lost row).
void scale_rows(const gk_tensor& t, int64_t rows, int64_t cols, int shift_seed) {
  std::vector<float> h(size_t(rows * cols));
  GK_TK_CUDA(cudaMemcpy(h.data(), t.data, h.size() * 4, cudaMemcpyDeviceToHost));
  for (int64_t r = 0; r < rows; ++r) {
    const int e = static_cast<int>((r * 7919 + shift_seed) % 49) - 24;  // -24..24
    for (int64_t c = 0; c < cols; ++c) h[r * cols + c] = std::ldexp(h[r * cols + c], e);
  }
  GK_TK_CUDA(cudaMemcpy(t.data, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
}

TEST_F(AudioExactAdversarial, BothFormsWithinTwiceFp32OnScaledRowsAndColumns) {
  for (const char* spec : {"audio.exact=f16", "audio.exact=tf32x3"}) {
    GK_ASSERT_OK(gk::set_overrides(handle(), spec));
    AudioProblem p({2, 293, 1024, 8, 128, 1e-6f, GK_PRECISION_EXACT});
    AudioRecipe r;
    r.seed = next_seed();
    p.generate(r, stream());
    GK_TK_CUDA(cudaStreamSynchronize(stream()));
    const auto t = p.tensors();
    scale_rows(t.hidden_states, 2 * 293, 1024, 3);
    scale_rows(t.v_proj_weight, 1024, 1024, 11);
    const gk::Status run = p.run(handle(), stream());
    (void)gk_testkit::apply_env_overrides(handle());
    GK_ASSERT_OK(run);
    p.run_gpu_reference(stream());
    const gk_testkit::Judgement exact = p.judge(0.002, 1e-5, stream())[2];
    p.run_cublas_fp32_v(stream());
    const gk_testkit::Judgement fp32 = p.judge(0.002, 1e-5, stream())[2];
    gk_test::report(std::string("054 exact v, scaled rows, ") + spec, r.seed, exact, 0.99);
    gk_test::report(std::string("054 cuBLAS fp32 v, scaled rows, ") + spec, r.seed, fp32, 0.99);
    EXPECT_EQ(exact.non_finite, 0) << spec;
    EXPECT_GT(fp32.rel_l2(), 0.0);
    EXPECT_LE(exact.rel_l2(), 2.0 * fp32.rel_l2()) << spec << ": exact " << exact.summary(0.99) << "; fp32 "
                                                   << fp32.summary(0.99);
    EXPECT_LE(exact.max_abs_err, 2.0 * fp32.max_abs_err) << spec << ": exact " << exact.summary(0.99);
  }
}

std::vector<std::pair<int64_t, int64_t>> suite_054_shapes() {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (const auto& w : gk_testkit::builtin_suite("054").workloads) shapes.emplace_back(w.batch, w.seq_len);
  return shapes;
}

INSTANTIATE_TEST_SUITE_P(Exact, AudioExactVsFp32, ::testing::ValuesIn(suite_054_shapes()),
                         [](const auto& info) {
                           return "B" + std::to_string(info.param.first) + "_S" + std::to_string(info.param.second);
                         });

// tf32 mode must round v's inputs to the nearest tf32 value (SPEC.md: truncation fails the official check on v).
// Every input is 1 + 0.75 ulp(tf32) times a power of two, so rounding to nearest gives 1 + ulp and truncation 1:
// v = sum over 1024 terms of x * w = (1 + 2^-10)^2 when rounded, 1 when truncated, (1 + 0.75 * 2^-10)^2 exact.
// Row counts cover the GEMM kernel classes the suite's shapes select (4 and 128: the split-K tf32 kernel, K split
// over clusters of 4; from 586 the fp16 operands on the ping-pong kernel; gpu-check pins the split-K kernel, with no
// K split from 586 rows, and the persistent kernel too, whose stream-K 2048 rows take).
struct RoundingCase {
  gk_precision precision;
  int64_t rows;
};
void PrintTo(const RoundingCase& c, std::ostream* os) { *os << mode_name(c.precision) << " rows " << c.rows; }

class AudioRounding : public GpuParamTest<RoundingCase> {};

TEST_P(AudioRounding, InputsRoundToNearest) {
  const int64_t hidden = 1024, rows = GetParam().rows;
  AudioProblem p({1, rows, hidden, 8, 128, 1e-6f, GetParam().precision});
  const auto t = p.tensors();
  const float x = 1.f + 0.75f * std::ldexp(1.f, -10);
  const std::vector<float> hs(rows * hidden, x), w(hidden * hidden, x * std::ldexp(1.f, -10)), ones(128, 1.f);
  for (const auto* d : {&t.q_proj_weight, &t.k_proj_weight, &t.v_proj_weight}) {
    GK_TK_CUDA(cudaMemcpy(d->data, w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  GK_TK_CUDA(cudaMemcpy(t.hidden_states.data, hs.data(), hs.size() * sizeof(float), cudaMemcpyHostToDevice));
  GK_TK_CUDA(cudaMemcpy(t.q_norm_weight.data, ones.data(), 128 * sizeof(float), cudaMemcpyHostToDevice));
  GK_TK_CUDA(cudaMemcpy(t.k_norm_weight.data, ones.data(), 128 * sizeof(float), cudaMemcpyHostToDevice));
  GK_ASSERT_OK(p.run(handle(), stream()));
  GK_TK_CUDA(cudaStreamSynchronize(stream()));
  std::vector<float> v(rows * hidden);
  GK_TK_CUDA(cudaMemcpy(v.data(), t.value_states.data, v.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const double rn = std::pow(1.0 + std::ldexp(1.0, -10), 2), exact = double(x) * double(x);
  const double want = GetParam().precision == GK_PRECISION_TF32 ? rn : exact;
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_NEAR(v[i], want, 4e-6) << "element " << i << " (rounded: " << rn << ", truncated: 1, exact: " << exact
                                  << ")";
  }
}

std::vector<RoundingCase> rounding_cases() {
  std::vector<RoundingCase> v;
  for (gk_precision p : {GK_PRECISION_TF32, GK_PRECISION_EXACT})
    for (int64_t rows : {4, 128, 586, 1024, 2048, 2164, 8192}) v.push_back({p, rows});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Rounding, AudioRounding, ::testing::ValuesIn(rounding_cases()), [](const auto& info) {
  return mode_name(info.param.precision) + "_rows" + std::to_string(info.param.rows);
});

// State that CTAs of one launch hand each other outside the caller's tensors, in the workspace under the call's
// epoch: stream-K's cuts on the persistent tf32 kernel, and the slices of v's weights that kernel rounds itself
// (head_gemm/weight_prep.cuh; under stream capture a pass rounds them instead, so the replays below also check the
// two give the same bits); and the rounded copies in the workspace. Whatever the workspace held before, repeated
// calls, and replays of one captured graph with new inputs in between and an eager call among them, give the eager
// call's bits; a stale rounded copy or mark would show. By default 128 rows take the split kernel (K split over
// clusters of 4) and from 512 rows the fp16 operands (a pass and its GEMM). gpu-check runs these tests again with
// the persistent kernel pinned, where on the H200's 66 clusters 2048 rows are 96 units, all in stream-K runs; 3000
// rows are 144 units (the last row tile ragged), one round of whole units and then stream-K; 4096 rows are 192
// units of whole units round-robin; at 3000 and 4096 the eager calls round v's weights in the kernel (whether
// stream-K runs depends on the resident cluster count), and with audio.v_round=kernel.
class AudioCrossCta : public GpuParamTest<int64_t> {};

TEST_P(AudioCrossCta, RepeatsAndReplaysGiveEagerBits) {
  const int64_t rows = GetParam();
  AudioProblem p({1, rows, 1024, 8, 128, 1e-6f, GK_PRECISION_TF32});
  const auto bits = [&] { return p.output_bits(stream()); };
  AudioRecipe r1, r2;
  r1.seed = next_seed();
  r2.seed = next_seed();
  p.generate(r1, stream());
  p.fill_workspace(0xff, stream());
  p.poison_output(stream());
  GK_ASSERT_OK(p.run(handle(), stream()));
  const auto first = bits();
  p.run_gpu_reference(stream());
  for (const auto& j : p.judge(0.002, 1e-5, stream())) EXPECT_TRUE(j.passed(0.99)) << j.summary(0.99);
  for (const unsigned char fill : {0x00, 0x5a}) {
    p.fill_workspace(fill, stream());
    p.poison_output(stream());
    GK_ASSERT_OK(p.run(handle(), stream()));
    EXPECT_TRUE(bits() == first) << "workspace filled with " << int(fill);
    p.poison_output(stream());
    GK_ASSERT_OK(p.run(handle(), stream()));
    EXPECT_TRUE(bits() == first) << "repeat after a workspace filled with " << int(fill);
  }
  p.generate(r2, stream());
  GK_ASSERT_OK(p.run(handle(), stream()));
  const auto second = bits();
  EXPECT_FALSE(second == first);

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const gk::Status captured = p.run(handle(), stream());
  ASSERT_EQ(cudaStreamEndCapture(stream(), &graph), cudaSuccess);
  GK_ASSERT_OK(captured);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 4; ++replay) {
    p.generate(replay % 2 == 0 ? r1 : r2, stream());
    p.poison_output(stream());
    ASSERT_EQ(cudaGraphLaunch(exec, stream()), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream()), cudaSuccess);
    EXPECT_TRUE(bits() == (replay % 2 == 0 ? first : second)) << "replay " << replay;
    if (replay == 1) {  // an eager call (a new epoch) between replays of the captured one
      p.poison_output(stream());
      GK_ASSERT_OK(p.run(handle(), stream()));
      EXPECT_TRUE(bits() == second) << "eager call between replays";
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

INSTANTIATE_TEST_SUITE_P(Tf32, AudioCrossCta,
                         ::testing::Values(int64_t(128), int64_t(512), int64_t(2048), int64_t(3000), int64_t(4096)),
                         [](const auto& info) { return "tf32_rows" + std::to_string(info.param); });

// NaN inputs propagate as NaN. A signalling NaN whose payload lies only in the low 13 mantissa bits (which the
// tensor cores ignore) in an activation poisons its token's q, k and v: v's rounding must not turn it into Inf,
// and where q and k read it truncated, as Inf, every column of the token's heads becomes infinite and the norm
// makes them NaN. One in a v weight row poisons that v column of every token. One in a q weight row poisons,
// through the norm, the whole q head of every token, except where q's operands are read truncated (tf32 mode's
// fused kernels, gk.h): there it is Inf, which leaves that column NaN and the rest of the head finite (zero). A
// quiet NaN in a k weight row poisons the whole k head in both modes. An Inf activation makes its token's q and k
// NaN (the norm divides Inf by Inf) and, in tf32 mode, its v entries Inf with the sign of the weight that meets it,
// as in fp32 (exact mode also meets Inf * small(w) with either sign, so there its v entries are only non-finite).
// Every other output stays finite.
class AudioNan : public GpuParamTest<RoundingCase> {};

TEST_P(AudioNan, NanAndInfPropagate) {
  const int64_t hidden = 1024, heads = 8, rows = GetParam().rows, n = heads * 128;
  AudioProblem p({1, rows, hidden, heads, 128, 1e-6f, GetParam().precision});
  p.generate(AudioRecipe{}, stream());
  const auto t = p.tensors();
  const gk_tensor* outs[3] = {&t.query_states, &t.key_states, &t.value_states};
  // Zeros, not the usual NaN poison: an expected NaN must have been written.
  for (const gk_tensor* o : outs) GK_TK_CUDA(cudaMemsetAsync(o->data, 0, rows * n * sizeof(float), stream()));
  const int64_t bad_row = rows / 2, inf_row = rows / 4, bad_v_col = 300, bad_q_col = 3 * 128 + 77, inf_k = 13;
  const int64_t bad_k_col = 5 * 128 + 3;
  const auto put = [&](const gk_tensor& d, int64_t i, uint32_t bits) {
    GK_TK_CUDA(cudaMemcpyAsync(static_cast<char*>(d.data) + 4 * i, &bits, 4, cudaMemcpyHostToDevice, stream()));
    GK_TK_CUDA(cudaStreamSynchronize(stream()));
  };
  put(t.hidden_states, bad_row * hidden + 7, 0x7f800001u);
  put(t.v_proj_weight, bad_v_col * hidden + 11, 0x7f800003u);
  put(t.q_proj_weight, bad_q_col * hidden + 500, 0xff801fffu);
  put(t.k_proj_weight, bad_k_col * hidden + 900, 0x7fc01234u);
  put(t.hidden_states, inf_row * hidden + inf_k, 0x7f800000u);
  std::vector<float> wv(n * hidden);
  GK_TK_CUDA(cudaMemcpy(wv.data(), t.v_proj_weight.data, wv.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const bool tf32 = GetParam().precision == GK_PRECISION_TF32;
  // The fused tf32 kernels truncate q's and k's operands (a NaN whose payload is in the low 13 bits becomes an
  // infinity); cuBLASLt's fast-tf32 kernels and the fp16 operand pass round them (it stays a NaN).
  std::string plan;
  GK_ASSERT_OK(gk::audio_qkv_plan(handle(), p.config(), t, &plan));
  const bool qk_truncated = tf32 && plan.find("audio.tf32=cublas") == std::string::npos &&
                            plan.find("audio.tf32=f16") == std::string::npos;
  GK_ASSERT_OK(p.run(handle(), stream()));
  GK_TK_CUDA(cudaStreamSynchronize(stream()));
  for (int o = 0; o < 3; ++o) {
    std::vector<float> y(rows * n);
    GK_TK_CUDA(cudaMemcpy(y.data(), outs[o]->data, y.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        const bool q_nan = qk_truncated ? c == bad_q_col : c / 128 == bad_q_col / 128;
        const bool nan = r == bad_row || (o == 2 && c == bad_v_col) || (o == 0 && q_nan) ||
                         (o == 1 && c / 128 == bad_k_col / 128) || (o < 2 && r == inf_row);
        const float v = y[r * n + c];
        const auto where = [&] { return std::string(kNames[o]) + " row " + std::to_string(r) + " column " +
                                        std::to_string(c) + " is " + std::to_string(v); };
        if (nan) {
          ASSERT_TRUE(std::isnan(v)) << where();
        } else if (r == inf_row) {
          ASSERT_FALSE(std::isfinite(v)) << where();
          if (tf32) ASSERT_EQ(v, std::copysign(INFINITY, wv[c * hidden + inf_k])) << where();
        } else {
          ASSERT_TRUE(std::isfinite(v)) << where();
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Nan, AudioNan, ::testing::ValuesIn(rounding_cases()), [](const auto& info) {
  return mode_name(info.param.precision) + "_rows" + std::to_string(info.param.rows);
});

}  // namespace
