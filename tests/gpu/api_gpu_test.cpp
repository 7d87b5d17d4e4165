// Behaviour of the public API on a real device: graph capture, errors that need a device, and the device judge.
#include <cuda_bf16.h>

#include <cmath>
#include <memory>
#include <vector>

#include "device_buffer.hpp"
#include "fill.hpp"
#include "gpu_test_util.hpp"
#include "problems.hpp"
#include "suites.hpp"

namespace {

using gk_test::GpuTest;

// No allocation, host sync or stream-ordering surprise inside a call: the call captures into a CUDA graph and
// the replay gives the bits of the eager call.
TEST_F(GpuTest, SmallGraphCaptureMatchesEager) {
  // The layer at 154 rows takes cuBLASLt (k and v batched where the weights allow, the norm pass and the attention
  // programmatic behind it, in additive mode the mask classification and the tile lists in between, programmatic
  // too; with kv_gemm=separate the norm pass on the side stream); at 120 rows the split-K q|k|v kernel with the
  // attention launched programmatically behind it (causal) or behind the tile lists (additive), and the O
  // projection's weights prefetched.
  std::vector<std::unique_ptr<gk_testkit::Gemma3Problem>> gs;
  for (const gk_mask_mode mask : {GK_MASK_CAUSAL, GK_MASK_ADDITIVE}) {
    gs.push_back(std::make_unique<gk_testkit::Gemma3Problem>(
        gk_gemma3_attention_config{2, 77, 1024, 8, 2, 128, 50.f, 1e-6f, 1.f, 0.f, mask}));
    gs.push_back(std::make_unique<gk_testkit::Gemma3Problem>(
        gk_gemma3_attention_config{1, 120, 1024, 8, 2, 128, 50.f, 1e-6f, 1.f, 0.f, mask}));
  }
  gk_testkit::AudioProblem a({2, 77, 1024, 8, 128, 1e-6f, GK_PRECISION_TF32});
  // a (154 rows) runs the split kernel as a programmatic dependent of the activations' rounding, a2 (1024 rows)
  // the persistent kernel as one of the weights' rounding (under capture a pass rounds them).
  gk_testkit::AudioProblem a2({1, 1024, 1024, 8, 128, 1e-6f, GK_PRECISION_TF32});
  gk_testkit::Gemma3Recipe gr;
  for (auto& g : gs) {
    gr.seed = next_seed();
    g->generate(gr, stream());
  }
  gk_testkit::AudioRecipe ar;
  ar.seed = next_seed();
  a.generate(ar, stream());
  ar.seed = next_seed();
  a2.generate(ar, stream());
  std::vector<std::vector<float>> eager;
  for (auto& g : gs) {
    GK_ASSERT_OK(g->run(handle(), stream()));
    eager.push_back(g->output(stream()));
  }
  GK_ASSERT_OK(a.run(handle(), stream()));
  GK_ASSERT_OK(a2.run(handle(), stream()));
  const auto eager_a = a.output_bits(stream()), eager_a2 = a2.output_bits(stream());

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  for (auto& g : gs) g->poison_output(stream());
  a.poison_output(stream());
  a2.poison_output(stream());
  ASSERT_EQ(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
  std::vector<gk::Status> sg;
  for (auto& g : gs) sg.push_back(g->run(handle(), stream()));
  const gk::Status s2 = a.run(handle(), stream());
  const gk::Status s3 = a2.run(handle(), stream());
  ASSERT_EQ(cudaStreamEndCapture(stream(), &graph), cudaSuccess);
  for (const gk::Status& st : sg) GK_ASSERT_OK(st);
  GK_ASSERT_OK(s2);
  GK_ASSERT_OK(s3);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  // Twice: a replay runs under the captured call's epoch, so the second finds what the first left in the cross-CTA
  // state words (stream-K's flags, head_gemm/stream_k.cuh), which must read as clear.
  for (int replay_no = 0; replay_no < 2; ++replay_no) {
    if (replay_no > 0) {
      for (auto& g : gs) g->poison_output(stream());
      a.poison_output(stream());
      a2.poison_output(stream());
    }
    ASSERT_EQ(cudaGraphLaunch(exec, stream()), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream()), cudaSuccess);
    for (size_t p = 0; p < gs.size(); ++p) {
      const auto replay = gs[p]->output(stream());
      ASSERT_EQ(eager[p].size(), replay.size());
      int64_t differ = 0;
      for (size_t i = 0; i < replay.size(); ++i) differ += !(eager[p][i] == replay[i]);
      EXPECT_EQ(differ, 0) << "layer problem " << p << ", replay " << replay_no << ": differs from the eager call";
    }
    EXPECT_TRUE(a.output_bits(stream()) == eager_a) << "split tf32 path, replay " << replay_no << ": differs";
    EXPECT_TRUE(a2.output_bits(stream()) == eager_a2) << "persistent tf32 path, replay " << replay_no << ": differs";
  }
  a.run_gpu_reference(stream());
  for (const auto& j : a.judge(0.002, 1e-5, stream())) EXPECT_TRUE(j.passed(0.99)) << j.summary(0.99);
  a2.run_gpu_reference(stream());
  for (const auto& j : a2.judge(0.002, 1e-5, stream())) EXPECT_TRUE(j.passed(0.99)) << j.summary(0.99);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_F(GpuTest, SmallWorkspaceTooSmallLaunchesNothing) {
  gk_testkit::Gemma3Problem g({1, 64, 1024, 8, 2, 128, 50.f, 1e-6f, 1.f, 0.f, GK_MASK_CAUSAL});
  gk_testkit::Gemma3Recipe r;
  r.seed = next_seed();
  g.generate(r, stream());
  g.poison_output(stream());
  size_t need = 0;
  GK_ASSERT_OK(gk::gemma3_attention_workspace_size(g.config(), &need));
  gk_testkit::DeviceBuffer ws(need);
  const gk::Status s =
      gk::gemma3_attention_forward(handle(), g.config(), g.tensors(), ws.get(), need - 256, stream());
  EXPECT_EQ(s.code(), GK_STATUS_WORKSPACE_TOO_SMALL) << s.message();
  const auto out = g.output(stream());
  for (float v : out) ASSERT_TRUE(std::isnan(v));  // still the poison: nothing ran
}

TEST_F(GpuTest, SmallDeviceJudgeAgreesWithHostJudge) {
  const int64_t n = 100003;
  gk_testkit::DeviceBuffer a(n * 2), b(n * 2);
  gk_testkit::fill(gk_testkit::normal(next_seed(), 1.f), a.as<__nv_bfloat16>(), n, stream());
  gk_testkit::fill(gk_testkit::normal(next_seed(), 1.f), b.as<__nv_bfloat16>(), n, stream());
  const auto dev = gk_testkit::judge_device(a.as<__nv_bfloat16>(), b.as<__nv_bfloat16>(), n, 0.5, 0.5, stream());
  std::vector<uint16_t> ha(n), hb(n);
  GK_TK_CUDA(cudaMemcpy(ha.data(), a.get(), n * 2, cudaMemcpyDeviceToHost));
  GK_TK_CUDA(cudaMemcpy(hb.data(), b.get(), n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> fa(n), fb(n);
  for (int64_t i = 0; i < n; ++i) fa[i] = gk_ref::bf16_from_bits(ha[i]), fb[i] = gk_ref::bf16_from_bits(hb[i]);
  const auto host = gk_testkit::judge_host(fa.data(), fb.data(), n, 0.5, 0.5);
  EXPECT_EQ(dev.matched, host.matched);
  EXPECT_EQ(dev.nonzero, host.nonzero);
  EXPECT_NEAR(dev.max_abs_err, host.max_abs_err, 1e-6);
  EXPECT_GT(host.matched, 0);
  EXPECT_LT(host.matched, n);
}

TEST_F(GpuTest, SmallGpuInputsMatchHostInputs) {
  // The CPU-only path of the CLI regenerates inputs on the host: they must be the ones the GPU makes.
  const gk_gemma3_attention_config c{1, 9, 64, 2, 1, 128, 50.f, 1e-6f, 1.f, 0.f, GK_MASK_ADDITIVE};
  gk_testkit::Gemma3Problem g(c);
  gk_testkit::Gemma3Recipe r;
  r.seed = next_seed();
  r.norm_weight_spread = 0.3f;
  r.mask_pattern = gk_testkit::MaskPattern::kPaddedCausal;
  g.generate(r, stream());
  const auto host = gk_testkit::generate_host(c, r);
  // Reference outputs from both input sets agree (inputs equal up to rare 1-ulp libm differences).
  g.run_cpu_reference(stream());
  const auto from_gpu_inputs = g.reference_output(stream());
  std::vector<float> from_host_inputs(from_gpu_inputs.size());
  gk_ref::gemma3_attention(gk_testkit::ref_dims(c), host.view(), from_host_inputs.data());
  const auto j = gk_testkit::judge_host(from_host_inputs.data(), from_gpu_inputs.data(), int64_t(from_gpu_inputs.size()),
                                        1e-2, 1e-2);
  EXPECT_TRUE(j.passed(1.0)) << j.summary(1.0);
}

}  // namespace
