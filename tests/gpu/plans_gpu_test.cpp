// Every kernel on every shape it can take, in one process: the suites' workloads (and a few extra shapes) under each
// pinned plan, set on the handle with gk_handle_set_overrides, judged with the official rule against the GPU
// reference. The default plans are the other test files' business; here each pin forces a kernel, a tile packing, a
// softmax form, a store or a weight layout onto shapes where the planner would not choose it.
#include <cstring>
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
using gk_testkit::Gemma3Problem;

// Restores the handle's pins (GK_OVERRIDES, usually none) when the test ends.
class Pinned {
 public:
  explicit Pinned(gk_handle_t h, const char* spec) : h_(h) { ok_ = gk::set_overrides(h, spec); }
  ~Pinned() { (void)gk_testkit::apply_env_overrides(h_); }
  const gk::Status& status() const { return ok_; }

 private:
  gk_handle_t h_;
  gk::Status ok_;
};

// One call of `c` under the handle's pins, with fresh inputs, judged with the official rule against the GPU
// reference (the plan it ran named on failure).
void check_gemma3(gk_handle_t handle, cudaStream_t stream, uint64_t seed, const gk_gemma3_attention_config& c,
                  double atol, double rtol, double required, const std::string& what) {
  Gemma3Problem p(c);
  gk_testkit::Gemma3Recipe r;
  r.seed = seed;
  std::string plan;
  GK_ASSERT_OK(gk::gemma3_attention_plan(handle, p.config(), p.tensors(), &plan));
  GK_ASSERT_OK(p.run_fresh(r, handle, stream));
  p.run_gpu_reference(stream);
  const auto j = p.judge(atol, rtol, stream);
  gk_test::report(what, r.seed, j, required);
  EXPECT_TRUE(j.passed(required)) << what << " plan " << plan << ": " << j.summary(0.99);
}

class Gemma3Pinned : public GpuParamTest<const char*> {};

TEST_P(Gemma3Pinned, SuiteAndExtraShapes) {
  const Pinned pin(handle(), GetParam());
  GK_ASSERT_OK(pin.status());
  const auto& suite = gk_testkit::builtin_suite("047");
  std::vector<gk_testkit::Workload> shapes = suite.workloads;
  for (const int64_t s : {1, 37, 130}) shapes.push_back({2, s, 0.05, 0.05, 0});
  for (const auto& w : shapes) {
    for (const gk_mask_mode mask : {GK_MASK_CAUSAL, GK_MASK_ADDITIVE}) {
      if (mask == GK_MASK_ADDITIVE && w.batch * w.seq_len * w.seq_len > (int64_t(1) << 26)) continue;
      auto c = gk_testkit::gemma3_config(suite, w);
      c.mask_mode = mask;
      const std::string what = std::string("047 pinned ") + GetParam() + " B" + std::to_string(w.batch) + " S" +
                               std::to_string(w.seq_len) + (mask == GK_MASK_ADDITIVE ? " additive" : " causal");
      check_gemma3(handle(), stream(), next_seed(), c, w.atol, w.rtol, suite.required_matched_ratio, what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, Gemma3Pinned,
                         ::testing::Values("attention.kernel=sm80", "attention.kernel=sm90",
                                           "attention.kernel=sm90,attention.tail=separate",
                                           "attention.kernel=sm90,attention.softmax=running",
                                           "attention.kernel=sm90,attention.softmax=fixed",
                                           "attention.kernel=sm90,attention.store=direct", "qkv=splitk", "o_proj=cublas",
                                           "qkv=cublas", "kv_gemm=separate", "o_prefetch=attention,attention.kernel=sm80",
                                           "o_prefetch=attention,attention.kernel=sm90"),
                         [](const auto& info) { return "p" + std::to_string(info.index); });

// head_dim 256 under each attention pin, on the 1B, 4B and 12B models' head shapes (groups 4 and 2) and one of group
// 1: causal, a sliding window and no mask, softcap on and off, lengths that leave packed GQA tails, partial key
// tiles and a single row; and two longer lengths, which on the 8/4 heads give the Hopper kernel's persistent grid
// two or more work tiles per CTA (its warpgroups pass the shared output staging buffer back and forth across
// tiles; Gemma3Store256 covers that more).
class Gemma3Pinned256 : public GpuParamTest<const char*> {};

TEST_P(Gemma3Pinned256, ModelHeadsAndMasks) {
  const Pinned pin(handle(), GetParam());
  GK_ASSERT_OK(pin.status());
  const auto& suite = gk_testkit::builtin_suite("047");
  struct Heads {
    int64_t hidden, q, kv;
  };
  const Heads heads[] = {{1152, 4, 1}, {2560, 8, 4}, {1024, 4, 4}};
  struct Shape {
    int64_t batch, seq_len, window;
    gk_mask_mode mask;
  };
  const Shape shapes[] = {{2, 1, 0, GK_MASK_CAUSAL},    {2, 37, 0, GK_MASK_CAUSAL},  {1, 130, 0, GK_MASK_CAUSAL},
                          {3, 293, 0, GK_MASK_CAUSAL},  {1, 700, 100, GK_MASK_CAUSAL}, {2, 293, 64, GK_MASK_CAUSAL},
                          {1, 300, 1, GK_MASK_CAUSAL},  {2, 129, 0, GK_MASK_NONE},   {1, 700, 0, GK_MASK_NONE},
                          {2, 3000, 1024, GK_MASK_CAUSAL}, {1, 4096, 0, GK_MASK_CAUSAL}};
  int n = 0;
  for (const Heads& h : heads) {
    for (const Shape& sh : shapes) {
      auto c = gk_testkit::gemma3_config(suite, {sh.batch, sh.seq_len, 0.05, 0.05, 0});
      c.hidden = h.hidden;
      c.num_q_heads = h.q;
      c.num_kv_heads = h.kv;
      c.head_dim = 256;
      c.query_scale = 0.0625f;
      c.mask_mode = sh.mask;
      c.sliding_window = sh.window;
      c.softcap = (n++ % 2 == 0) ? 0.f : c.softcap;
      const std::string what = std::string("D256 pinned ") + GetParam() + " H" + std::to_string(h.q) + "/" +
                               std::to_string(h.kv) + " B" + std::to_string(sh.batch) + " S" +
                               std::to_string(sh.seq_len) + (sh.mask == GK_MASK_NONE ? " none" : " causal") +
                               " window " + std::to_string(sh.window) + (c.softcap > 0.f ? " softcap" : "");
      check_gemma3(handle(), stream(), next_seed(), c, 0.05, 0.05, suite.required_matched_ratio, what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, Gemma3Pinned256,
                         ::testing::Values("attention.kernel=sm80", "attention.kernel=sm90",
                                           "attention.kernel=sm90,attention.tail=separate",
                                           "attention.kernel=sm90,attention.store=direct"),
                         [](const auto& info) { return "p" + std::to_string(info.index); });

// The Hopper kernel's two store paths at head_dim 256 give the same bits: the staged rows leave by TMA stores, or
// are read back by every thread for 16-byte stores; both through the one staging buffer that the two consumer
// warpgroups hand back and forth, over grids of several work tiles per CTA (a hand-off out of turn would show here
// as rows of the other warpgroup or of the previous tile).
class Gemma3Store256 : public gk_test::GpuTest {};

TEST_F(Gemma3Store256, TmaAndDirectStoresGiveTheSameBits) {
  const auto& suite = gk_testkit::builtin_suite("047");
  struct Case {
    int64_t batch, seq_len, window, q, kv;
  };
  const Case cases[] = {{2, 3000, 1024, 8, 4}, {1, 8192, 512, 4, 1}, {2, 2053, 0, 16, 8}};
  for (const Case& k : cases) {
    auto c = gk_testkit::gemma3_config(suite, {k.batch, k.seq_len, 0.05, 0.05, 0});
    c.hidden = 1024;
    c.num_q_heads = k.q;
    c.num_kv_heads = k.kv;
    c.head_dim = 256;
    c.query_scale = 0.0625f;
    c.sliding_window = k.window;
    c.softcap = 0.f;
    Gemma3Problem p(c);
    gk_testkit::Gemma3Recipe r;
    r.seed = next_seed();
    p.generate(r, stream());
    std::vector<float> out[2];
    for (const int direct : {0, 1}) {
      const Pinned pin(handle(), direct ? "attention.kernel=sm90,attention.store=direct"
                                        : "attention.kernel=sm90,attention.store=tma");
      GK_ASSERT_OK(pin.status());
      std::string plan;
      GK_ASSERT_OK(gk::gemma3_attention_plan(handle(), p.config(), p.tensors(), &plan));
      ASSERT_NE(plan.find(direct ? "attention.store=direct" : "attention.store=tma"), std::string::npos) << plan;
      p.poison_output(stream());
      GK_ASSERT_OK(p.run(handle(), stream()));
      out[direct] = p.output(stream());
    }
    const std::string what = "B" + std::to_string(k.batch) + " S" + std::to_string(k.seq_len) + " window " +
                             std::to_string(k.window) + " H" + std::to_string(k.q) + "/" + std::to_string(k.kv);
    ASSERT_EQ(out[0].size(), out[1].size());
    EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)), 0) << what;
    p.run_gpu_reference(stream());
    const auto j = p.judge(0.05, 0.05, stream());
    EXPECT_TRUE(j.passed(suite.required_matched_ratio)) << what << ": " << j.summary(suite.required_matched_ratio);
  }
}

class AudioPinned : public GpuParamTest<const char*> {};

TEST_P(AudioPinned, Suite) {
  const Pinned pin(handle(), GetParam());
  GK_ASSERT_OK(pin.status());
  const auto& suite = gk_testkit::builtin_suite("054");
  for (const auto& w : suite.workloads) {
    for (const gk_precision prec : {GK_PRECISION_TF32, GK_PRECISION_EXACT}) {
      AudioProblem p(gk_testkit::audio_config(suite, w, prec));
      gk_testkit::AudioRecipe r;
      r.seed = next_seed();
      std::string plan;
      GK_ASSERT_OK(gk::audio_qkv_plan(handle(), p.config(), p.tensors(), &plan));
      // A pinned fp16 path must be the one that runs (the suite's shapes all fit it).
      const char* f16_pin = prec == GK_PRECISION_TF32 ? "audio.tf32=f16" : "audio.exact=f16";
      if (std::string(GetParam()).find(f16_pin) != std::string::npos) {
        EXPECT_NE(plan.find(f16_pin), std::string::npos) << plan;
      }
      GK_ASSERT_OK(p.run_fresh(r, handle(), stream()));
      p.run_gpu_reference(stream());
      const auto js = p.judge(w.atol, w.rtol, stream());
      for (int i = 0; i < 3; ++i) {
        const std::string what = std::string("054 pinned ") + GetParam() + (prec == GK_PRECISION_TF32 ? " tf32" : " exact") +
                                 " B" + std::to_string(w.batch) + " S" + std::to_string(w.seq_len) + " " + "qkv"[i];
        gk_test::report(what, r.seed, js[i], suite.required_matched_ratio);
        EXPECT_TRUE(js[i].passed(suite.required_matched_ratio)) << what << " plan " << plan << ": " << js[i].summary(0.99);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, AudioPinned,
                         ::testing::Values("audio.tf32=cublas,audio.exact=cublas", "audio.tf32=splitk",
                                           "audio.tf32=persistent", "audio.tf32=persistent,audio.stream_k=off",
                                           "audio.tf32=persistent,audio.v_round=pass",
                                           "audio.tf32=persistent,audio.v_round=kernel",
                                           "audio.tf32=splitk,audio.v_weights=registers",
                                           "audio.tf32=splitk,audio.v_weights=smem",
                                           "audio.tf32=splitk,audio.activations=smem,audio.exact=tf32x3",
                                           "audio.tf32=f16,audio.exact=f16", "audio.tf32=persistent,audio.exact=tf32x3",
                                           "audio.tf32=f16,audio.exact=f16,launch=stream",
                                           "audio.tf32=f16,audio.f16_tile=head,audio.f16_multicast=off",
                                           "audio.tf32=f16,audio.f16_tile=pair,audio.f16_multicast=off",
                                           "audio.tf32=f16,audio.f16_tile=head,audio.f16_multicast=weights",
                                           "audio.tf32=f16,audio.f16_tile=pair,audio.f16_multicast=weights"),
                         [](const auto& info) { return "p" + std::to_string(info.index); });

// A call of two kernels (a pass and its GEMM) as one graph launch (launch_graph.hpp) gives the bits of the same two
// kernels issued one after another, on every path that has a pass. Under launch=graph each problem makes two calls
// (a chain's first call goes out launch by launch, its second builds the graph); a second problem of the same shape
// (other buffers, other inputs) reuses the handle's graph with its own arguments, and a third shape adds another.
struct LaunchCase {
  const char* pin;
  gk_precision precision;
};

class AudioLaunchGraph : public GpuParamTest<LaunchCase> {};

TEST_P(AudioLaunchGraph, SameBitsAsTheStreamAndArgumentsFollowTheCall) {
  const LaunchCase lc = GetParam();
  int graphs = 0;  // calls that went out as a graph launch
  for (const int64_t rows : {256, 1024, 1024, 1500}) {
    AudioProblem p({1, rows, 1024, 8, 128, 1e-6f, lc.precision});
    gk_testkit::AudioRecipe r;
    r.seed = next_seed();
    p.generate(r, stream());
    std::vector<uint32_t> bits[3];
    for (const int graph : {0, 1, 2}) {
      const std::string spec = std::string(lc.pin) + (graph > 0 ? ",launch=graph" : ",launch=stream");
      const Pinned pin(handle(), spec.c_str());
      GK_ASSERT_OK(pin.status());
      std::string plan;
      GK_ASSERT_OK(gk::audio_qkv_plan(handle(), p.config(), p.tensors(), &plan));
      // A plan of one kernel has no launch choice to make (the pin may not apply at every row count).
      if (plan.find("launch=") != std::string::npos) {
        ASSERT_NE(plan.find(graph > 0 ? "launch=graph" : "launch=stream"), std::string::npos) << plan;
        graphs += graph == 2;
      }
      p.poison_output(stream());
      GK_ASSERT_OK(p.run(handle(), stream()));
      bits[graph] = p.output_bits(stream());
    }
    const std::string where = std::string(lc.pin) + " rows " + std::to_string(rows);
    EXPECT_TRUE(bits[0] == bits[1]) << where << ", first graph-mode call";
    EXPECT_TRUE(bits[0] == bits[2]) << where << ", second graph-mode call";
    p.run_gpu_reference(stream());
    for (const auto& j : p.judge(0.002, 1e-5, stream())) {
      EXPECT_TRUE(j.passed(0.99)) << where << ": " << j.summary(0.99);
    }
  }
  EXPECT_GE(graphs, 3) << lc.pin << ": the pin's pass ran as a graph launch on too few shapes";
}

INSTANTIATE_TEST_SUITE_P(Passes, AudioLaunchGraph,
                         ::testing::Values(LaunchCase{"audio.tf32=persistent,audio.v_round=pass", GK_PRECISION_TF32},
                                           LaunchCase{"audio.tf32=splitk,audio.activations=prepass", GK_PRECISION_TF32},
                                           LaunchCase{"audio.tf32=f16", GK_PRECISION_TF32},
                                           LaunchCase{"audio.tf32=f16,audio.f16_tile=head", GK_PRECISION_TF32},
                                           LaunchCase{"audio.tf32=f16,audio.f16_multicast=off", GK_PRECISION_TF32},
                                           LaunchCase{"audio.exact=f16", GK_PRECISION_EXACT},
                                           LaunchCase{"audio.exact=tf32x3,audio.activations=prepass",
                                                      GK_PRECISION_EXACT}),
                         [](const auto& info) { return "p" + std::to_string(info.index); });

// The layer's own kernels (the q|k|v kernel, the cache write, the attention's, a few-row O projection) as one graph
// launch give the bits of the same launches one after another: the split-K q|k|v kernel with causal and additive
// masks (the mask's classification and lists in the chain), the few-row kernels, and decode steps on a cache. Two
// calls under launch=graph (the second builds the graph, or reuses it); the second problem of the same shape reuses
// the handle's graph with its own arguments.
struct LayerLaunchCase {
  int64_t batch, seq_len, cached;
  gk_mask_mode mask;
};

class Gemma3LaunchGraph : public GpuParamTest<LayerLaunchCase> {};

TEST_P(Gemma3LaunchGraph, SameBitsAsTheStream) {
  const LayerLaunchCase lc = GetParam();
  gk_gemma3_attention_config c{lc.batch, lc.seq_len, 3072, 24, 8, 128, 50.f, 1e-6f, 1.f, 0.f, lc.mask};
  for (int problem = 0; problem < 2; ++problem) {
    Gemma3Problem p(c, 0, gk_testkit::WeightLayout::kSeparate, lc.cached);
    gk_testkit::Gemma3Recipe r;
    r.seed = next_seed();
    p.generate(r, stream());
    std::vector<float> out[3];
    for (const int graph : {0, 1, 2}) {
      const Pinned pin(handle(), graph > 0 ? "launch=graph" : "launch=stream");
      GK_ASSERT_OK(pin.status());
      if (lc.cached == 0) {
        std::string plan;
        GK_ASSERT_OK(gk::gemma3_attention_plan(handle(), p.config(), p.tensors(), &plan));
        ASSERT_NE(plan.find(graph > 0 ? "launch=graph" : "launch=stream"), std::string::npos) << plan;
      }
      p.poison_output(stream());
      GK_ASSERT_OK(p.run(handle(), stream()));
      out[graph] = p.output(stream());
    }
    const std::string what = "B" + std::to_string(lc.batch) + " S" + std::to_string(lc.seq_len) + " cached " +
                             std::to_string(lc.cached) + " problem " + std::to_string(problem);
    for (const int graph : {1, 2}) {
      ASSERT_EQ(out[0].size(), out[graph].size());
      EXPECT_EQ(std::memcmp(out[0].data(), out[graph].data(), out[0].size() * sizeof(float)), 0)
          << what << ", graph-mode call " << graph;
    }
    p.run_gpu_reference(stream());
    const auto j = p.judge(0.05, 0.05, stream());
    EXPECT_TRUE(j.passed(0.99)) << what << ": " << j.summary(0.99);
  }
}

INSTANTIATE_TEST_SUITE_P(Chains, Gemma3LaunchGraph,
                         ::testing::Values(LayerLaunchCase{1, 128, 0, GK_MASK_CAUSAL},
                                           LayerLaunchCase{1, 128, 0, GK_MASK_ADDITIVE},
                                           LayerLaunchCase{2, 5, 0, GK_MASK_CAUSAL},
                                           LayerLaunchCase{2, 1, 300, GK_MASK_CAUSAL},
                                           LayerLaunchCase{3, 4, 1000, GK_MASK_CAUSAL}),
                         [](const auto& info) { return "c" + std::to_string(info.index); });

// Weights prepared once (gk_audio_qkv_prepare) give the same bits as the fp16 path preparing them per call (the
// same pass and kernel), and pass the official rule on every 054 workload; a second call reuses them.
class AudioPreparedWeights : public gk_test::GpuTest {};

TEST_F(AudioPreparedWeights, SameBitsAsTheFp16PathOnEverySuiteWorkload) {
  const auto& suite = gk_testkit::builtin_suite("054");
  const Pinned pin(handle(), "audio.tf32=f16");
  GK_ASSERT_OK(pin.status());
  for (const auto& w : suite.workloads) {
    AudioProblem p(gk_testkit::audio_config(suite, w, GK_PRECISION_TF32));
    gk_testkit::AudioRecipe r;
    r.seed = next_seed();
    p.generate(r, stream());
    p.poison_output(stream());
    GK_ASSERT_OK(p.run(handle(), stream()));
    const std::vector<uint32_t> per_call = p.output_bits(stream());
    size_t bytes = 0;
    GK_ASSERT_OK(gk::audio_qkv_prepared_size(p.config(), &bytes));
    gk_testkit::DeviceBuffer buf(bytes);
    gk_audio_qkv_prepared prepared{};
    GK_ASSERT_OK(gk::audio_qkv_prepare(handle(), p.config(), p.tensors(), buf.get(), bytes, stream(), &prepared));
    const std::string where = "B" + std::to_string(w.batch) + " S" + std::to_string(w.seq_len);
    for (int call = 0; call < 2; ++call) {
      p.poison_output(stream());
      GK_ASSERT_OK(p.run_prepared(handle(), prepared, stream()));
      EXPECT_EQ(p.output_bits(stream()), per_call) << where << " call " << call;
    }
    p.run_gpu_reference(stream());
    const auto js = p.judge(w.atol, w.rtol, stream());
    for (int i = 0; i < 3; ++i) {
      const std::string what = "054 prepared weights " + where + " " + "qkv"[i];
      gk_test::report(what, r.seed, js[i], suite.required_matched_ratio);
      EXPECT_TRUE(js[i].passed(suite.required_matched_ratio)) << what << ": " << js[i].summary(0.99);
    }
  }
}

// The ping-pong kernel's forms against the GPU reference under the official rule, and the clustered form (each CTA
// loading half of a tile's weight rows, multicast to both) against the unclustered one bit for bit (the same
// products in the same order): for both tiles, at row counts with fewer units than resident CTAs (384 rows), an
// odd number of tiles a CTA, a last row tile cut short (for the 64-row tiles too), more heads (so a CTA's tiles
// start mid row tile), and odd row-tile counts (a cluster's second row tile past M).
class AudioF16Pingpong : public gk_test::GpuTest {};

TEST_F(AudioF16Pingpong, MulticastGivesTheSameBits) {
  struct Case {
    int64_t rows, heads;
  };
  int pingponged = 0, multicast = 0;
  for (const Case cs : {Case{384, 8}, Case{1000, 8}, Case{1408, 8}, Case{2112, 8}, Case{4097, 8}, Case{8192, 8},
                        Case{777, 10}, Case{2050, 6}}) {
    for (const char* tile : {"head", "pair"}) {
      AudioProblem p({1, cs.rows, 1024, cs.heads, 128, 1e-6f, GK_PRECISION_TF32});
      gk_testkit::AudioRecipe r;
      r.seed = next_seed();
      p.generate(r, stream());
      p.run_gpu_reference(stream());  // into its own buffers: both forms are judged against it
      std::vector<uint32_t> bits[2];
      for (const int mc : {0, 1}) {
        const std::string spec = std::string("audio.tf32=f16,audio.f16_tile=") + tile +
                                 (mc ? ",audio.f16_multicast=weights" : ",audio.f16_multicast=off");
        const Pinned pin(handle(), spec.c_str());
        GK_ASSERT_OK(pin.status());
        std::string printed;
        GK_ASSERT_OK(gk::audio_qkv_plan(handle(), p.config(), p.tensors(), &printed));
        pingponged += printed.find("audio.f16_tile=") != std::string::npos || printed.find("audio.f16_multicast=") !=
                                                                                    std::string::npos;
        multicast += mc == 1 && printed.find("audio.f16_multicast=weights") != std::string::npos;
        p.poison_output(stream());
        GK_ASSERT_OK(p.run(handle(), stream()));
        bits[mc] = p.output_bits(stream());
        const std::string where = std::to_string(cs.rows) + " rows, " + std::to_string(cs.heads) + " heads, " + spec;
        for (const auto& j : p.judge(0.002, 1e-5, stream())) {
          EXPECT_TRUE(j.passed(0.99)) << where << ": " << j.summary(0.99);
        }
      }
      EXPECT_TRUE(bits[0] == bits[1]) << cs.rows << " rows, " << cs.heads << " heads, " << tile << ", multicast";
    }
  }
  EXPECT_GE(pingponged, 16) << "the ping-pong kernel ran on too few of the cases";
  EXPECT_GE(multicast, 8) << "the multicast form ran on too few of the cases";
}

}  // namespace
