// The planners (src/gemma3_layer/plan.cpp, src/attention/attention_plan.cpp, src/audio_qkv/plan.cpp) on a described
// device: the dispatch table of docs/dispatch.md on the suites' shapes, pins, and the plan's printed form, which
// pins the same plan when passed back. No GPU: planning looks at shapes, addresses and the device description only.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "attention/attention_plan.hpp"
#include "audio_qkv/plan.hpp"
#include "common/overrides.hpp"
#include "gemma3_layer/plan.hpp"
#include "suites.hpp"

namespace {

using gk::detail::DeviceInfo;
using gk::detail::Overrides;

// An H200-like description: 132 SMs; cluster residency as the occupancy query reports clusters confined to GPCs.
DeviceInfo hopper() {
  DeviceInfo d;
  d.sms = 132;
  for (int h = 0; h < 2; ++h) {
    for (int s = 2; s <= gk::detail::kMaxClusterSplit; ++s) d.proj_splitk_clusters[h][s] = s <= 2 ? 66 : 120 / s;
  }
  d.audio_tf32_clusters[2] = d.audio_tf32x3_clusters[2] = 66;
  d.audio_tf32_clusters[4] = d.audio_tf32x3_clusters[4] = 30;
  d.head_gemm_clusters = 66;
  d.audio_f16_pingpong_clusters[0] = d.audio_f16_pingpong_clusters[1] = 66;
  for (int u = 0; u < 2; ++u) {
    d.skinny_proj_blocks_per_sm[u] = 2;
    for (int s = 2; s <= gk::detail::kMaxClusterSplit; ++s) d.skinny_proj_clusters[u][s] = 240 / s;
  }
  return d;
}

Overrides pins(const char* spec) {
  Overrides o;
  EXPECT_TRUE(gk::detail::parse_overrides(spec, &o).ok()) << spec;
  return o;
}

// Tensors at made-up 256-byte aligned addresses: the planner reads addresses, never memory. `packed` lays the three
// projection weights back to back ([Wq; Wk; Wv]); `v_low` puts v's weights below k's.
struct FakeLayer {
  gk_gemma3_attention_config c{};
  gk_gemma3_attention_tensors t{};
  FakeLayer(int64_t b, int64_t s, bool packed = false, bool v_low = false) {
    c = {b, s, 3072, 24, 8, 128, 50.f, 1e-6f, 1.f, 0.f, GK_MASK_CAUSAL};
    const auto at = [](uintptr_t a) { return reinterpret_cast<void*>(a); };
    const uintptr_t q_bytes = 24 * 128 * 3072 * 2, kv_bytes = 8 * 128 * 3072 * 2, base = uintptr_t(1) << 32;
    t.hidden_states.data = at(base - (uintptr_t(1) << 28));
    t.cos.data = at(base - (uintptr_t(2) << 28));
    t.out.data = at(base + (uintptr_t(5) << 26));
    t.sin.data = at(base - (uintptr_t(3) << 28));
    t.q_proj_weight.data = at(base);
    uintptr_t k = packed ? base + q_bytes : base + (uintptr_t(1) << 26);
    uintptr_t v = packed ? k + kv_bytes : base + (uintptr_t(2) << 26);
    if (v_low) std::swap(k, v);
    t.k_proj_weight.data = at(k);
    t.v_proj_weight.data = at(v);
    t.o_proj_weight.data = at(base + (uintptr_t(3) << 26));
    t.q_norm_weight.data = at(base + (uintptr_t(4) << 26));
    t.k_norm_weight.data = at(base + (uintptr_t(4) << 26) + 256);
  }
  gk::gemma3::LayerPlan plan(const Overrides& ov = Overrides(), bool capturing = false, bool cached = false) const {
    gk::gemma3::LayerPlan p;
    EXPECT_TRUE(gk::gemma3::plan_layer(c, t, hopper(), ov, &p, capturing, cached).ok());
    return p;
  }
};

// Where the q|k|v step is the library's own kernel, the call's kernels go out as one graph launch (not under
// capture, not with launch=stream pinned); after cuBLASLt's GEMMs there is no launch choice (and none printed).
TEST(LayerPlanner, OwnKernelChainsGoOutAsOneGraph) {
  const auto text = [](const gk::gemma3::LayerPlan& p) { return gk::detail::format_overrides(p.chosen); };
  const FakeLayer small(1, 128), decode(8, 1), large(1, 8192);
  for (const FakeLayer* f : {&small, &decode}) {
    const auto p = f->plan();
    ASSERT_NE(p.qkv, gk::gemma3::QkvKernel::kCublas);
    EXPECT_TRUE(p.graph);
    EXPECT_NE(text(p).find("launch=graph"), std::string::npos) << text(p);
    EXPECT_FALSE(f->plan(Overrides(), /*capturing=*/true).graph);
    EXPECT_NE(text(f->plan(Overrides(), true)).find("launch=stream"), std::string::npos);
    EXPECT_FALSE(f->plan(pins("launch=stream")).graph);
  }
  const auto p = large.plan();
  ASSERT_EQ(p.qkv, gk::gemma3::QkvKernel::kCublas);
  EXPECT_FALSE(p.graph);
  EXPECT_EQ(text(p).find("launch="), std::string::npos) << text(p);
}

TEST(LayerPlanner, SuiteDispatch) {
  using gk::gemma3::AttentionKernel;
  using gk::gemma3::OPrefetch;
  using gk::gemma3::QkvKernel;
  for (const auto& w : gk_testkit::builtin_suite("047").workloads) {
    SCOPED_TRACE("B=" + std::to_string(w.batch) + " S=" + std::to_string(w.seq_len));
    const FakeLayer f(w.batch, w.seq_len);
    const auto p = f.plan();
    const int64_t rows = w.batch * w.seq_len;
    // The split-K q|k|v kernel at a single row tile, cuBLASLt + the pass beyond; W_o prefetched only there.
    EXPECT_EQ(p.qkv, rows <= 128 ? QkvKernel::kSplitk : QkvKernel::kCublas);
    EXPECT_EQ(p.o_prefetch, rows <= 128 ? OPrefetch::kProjection : OPrefetch::kNone);
    if (p.qkv == QkvKernel::kSplitk) {
      EXPECT_EQ(p.splitk.heads_per_tile, 1);
      EXPECT_GT(p.splitk.split, 1);  // 40 head tiles spread over most SMs
    }
    // The sm90 kernel unless its 128-row tiles number fewer than half the SMs: only (1, 128) has 24.
    const int64_t tiles = (w.seq_len + 127) / 128 * w.batch * 24;
    EXPECT_EQ(p.attention.kernel, 2 * tiles >= 132 ? AttentionKernel::kSm90 : AttentionKernel::kSm80);
    if (p.attention.kernel == AttentionKernel::kSm90) {
      EXPECT_TRUE(p.attention.fixed_softmax);  // softcap 50, causal
      EXPECT_TRUE(p.attention.o_tma);
      EXPECT_EQ(p.attention.tail_rows, w.seq_len % 128 == 0 ? 0 : (w.seq_len % 128 + 7) / 8 * 8 * 3 <= 128
                                                                       ? (w.seq_len % 128 + 7) / 8 * 8
                                                                       : 0);
      EXPECT_LE(p.attention.grid, 132);
    }
    // Separate allocations on the cuBLASLt path: k and v as one strided-batch GEMM, q|k|v not one GEMM.
    EXPECT_EQ(p.kv_batched, p.qkv == QkvKernel::kCublas);
    EXPECT_FALSE(p.qkv_one_gemm);
  }
}

TEST(LayerPlanner, PrintedPlanPinsTheSamePlan) {
  for (const auto& w : gk_testkit::builtin_suite("047").workloads) {
    const FakeLayer f(w.batch, w.seq_len);
    const auto p = f.plan();
    const std::string printed = gk::detail::format_overrides(p.chosen);
    const auto again = f.plan(pins(printed.c_str()));
    EXPECT_EQ(gk::detail::format_overrides(again.chosen), printed);
    EXPECT_EQ(again.qkv, p.qkv);
    EXPECT_EQ(again.attention.kernel, p.attention.kernel);
    EXPECT_EQ(again.attention.tail_rows, p.attention.tail_rows);
    EXPECT_EQ(again.attention.fixed_softmax, p.attention.fixed_softmax);
    EXPECT_EQ(again.o_prefetch, p.o_prefetch);
  }
}

TEST(LayerPlanner, PinsApplyWhereTheirKernelRuns) {
  using gk::gemma3::AttentionKernel;
  using gk::gemma3::QkvKernel;
  const FakeLayer small(1, 128), large(1, 8192);
  EXPECT_EQ(large.plan(pins("attention.kernel=sm80")).attention.kernel, AttentionKernel::kSm80);
  EXPECT_EQ(small.plan(pins("attention.kernel=sm90")).attention.kernel, AttentionKernel::kSm90);
  EXPECT_EQ(small.plan(pins("qkv=cublas")).qkv, QkvKernel::kCublas);
  EXPECT_EQ(large.plan(pins("qkv=splitk")).qkv, QkvKernel::kSplitk);
  EXPECT_EQ(large.plan(pins("qkv=splitk")).splitk.heads_per_tile, 2);
  EXPECT_FALSE(large.plan(pins("attention.softmax=running")).attention.fixed_softmax);
  EXPECT_FALSE(large.plan(pins("attention.store=direct")).attention.o_tma);
  const FakeLayer tail(4, 2053);
  EXPECT_EQ(tail.plan().attention.tail_rows, 8);
  EXPECT_EQ(tail.plan(pins("attention.tail=separate")).attention.tail_rows, 0);
  // o_prefetch=projection asks the split-K kernel, which does not run at 8192 rows: nobody prefetches.
  EXPECT_EQ(large.plan(pins("o_prefetch=projection")).o_prefetch, gk::gemma3::OPrefetch::kNone);
  EXPECT_EQ(large.plan(pins("o_prefetch=attention")).o_prefetch, gk::gemma3::OPrefetch::kAttention);
}

// With a cache the attention streams it, and W_o's prefetch is off by default at every row count (v48); a pin
// still asks, and gemma3_attend follows the same rule.
TEST(LayerPlanner, CachedCallsDoNotPrefetchTheOWeights) {
  using gk::gemma3::OPrefetch;
  for (const int64_t b : {1, 8, 64}) {
    const FakeLayer f(b, 1);
    EXPECT_NE(f.plan().o_prefetch, OPrefetch::kNone) << b;  // without a cache, one row tile: prefetched
    EXPECT_EQ(f.plan(Overrides(), false, true).o_prefetch, OPrefetch::kNone) << b;
    EXPECT_EQ(f.plan(pins("o_prefetch=attention"), false, true).o_prefetch, OPrefetch::kAttention) << b;
  }
  // A decode plan names no attention kernel: attention.kernel=sm80 would pin the sm80 kernel's cached form instead.
  gk::gemma3::LayerPlan decode = FakeLayer(1, 1).plan(Overrides(), false, true);
  decode.attention = gk::gemma3::AttentionPlan{};
  decode.attention.kernel = gk::gemma3::AttentionKernel::kDecode;
  gk::gemma3::record_attention_choices(decode.attention, &decode.chosen);
  const std::string text = gk::detail::format_overrides(decode.chosen);
  EXPECT_EQ(text.find("attention."), std::string::npos) << text;
  EXPECT_NE(text.find("o_prefetch=off"), std::string::npos) << text;
  EXPECT_FALSE(gk::gemma3::attend_prefetches_o(Overrides()));
  EXPECT_TRUE(gk::gemma3::attend_prefetches_o(pins("o_prefetch=attention")));
  EXPECT_FALSE(gk::gemma3::attend_prefetches_o(pins("o_prefetch=off")));
}

TEST(LayerPlanner, FewRowsTakeTheFewRowKernel) {
  using gk::gemma3::OProjKernel;
  using gk::gemma3::QkvKernel;
  for (const int64_t b : {1, 8, 16}) {
    const auto p = FakeLayer(b, 1).plan();
    EXPECT_EQ(p.qkv, QkvKernel::kSkinny);
    EXPECT_EQ(p.o_proj, OProjKernel::kSkinny);
    // 40 head tiles and 24 O tiles, each K split as far as one resident wave of two CTAs per SM allows.
    EXPECT_EQ(p.skinny.split, 6);
    EXPECT_EQ(p.o_skinny.split, 8);
  }
  const auto seventeen = FakeLayer(17, 1).plan();
  EXPECT_EQ(seventeen.qkv, QkvKernel::kSplitk);
  EXPECT_EQ(seventeen.o_proj, OProjKernel::kCublas);
  EXPECT_EQ(FakeLayer(1, 1).plan(pins("qkv=splitk")).qkv, QkvKernel::kSplitk);
  EXPECT_EQ(FakeLayer(1, 1).plan(pins("o_proj=cublas")).o_proj, OProjKernel::kCublas);
  // A pin where the kernel cannot take the call (128 rows) leaves the automatic choice.
  EXPECT_EQ(FakeLayer(1, 128).plan(pins("qkv=skinny")).qkv, QkvKernel::kSplitk);
  EXPECT_EQ(FakeLayer(1, 128).plan(pins("o_proj=skinny")).o_proj, OProjKernel::kCublas);
  // A device where the kernel cannot be resident (the occupancy query answered nothing) never takes it.
  FakeLayer f(1, 1);
  DeviceInfo none = hopper();
  none.skinny_proj_blocks_per_sm[0] = none.skinny_proj_blocks_per_sm[1] = 0;
  gk::gemma3::LayerPlan p;
  ASSERT_TRUE(gk::gemma3::plan_layer(f.c, f.t, none, Overrides(), &p).ok());
  EXPECT_EQ(p.qkv, QkvKernel::kSplitk);
  EXPECT_EQ(p.o_proj, OProjKernel::kCublas);
}

TEST(LayerPlanner, FewRowSplitStaysResidentAndLeavesEveryCtaItsChunks) {
  gk::gemma3::SkinnyProjOperands o;
  o.m = 1;
  o.segments = 1;
  o.units[0] = 40;
  o.k = 3072;
  int resident[gk::detail::kMaxClusterSplit + 1] = {};
  for (int s = 2; s <= gk::detail::kMaxClusterSplit; ++s) resident[s] = 240 / s;
  EXPECT_EQ(gk::gemma3::plan_skinny_proj(o, 264, resident).split, 6);
  EXPECT_EQ(gk::gemma3::plan_skinny_proj(o, 132, resident).split, 3);
  o.k = 256;  // 8 chunks: two per CTA at most
  EXPECT_EQ(gk::gemma3::plan_skinny_proj(o, 264, resident).split, 2);
  o.units[0] = 200;  // more tiles than half the slots: no split
  EXPECT_EQ(gk::gemma3::plan_skinny_proj(o, 264, resident).split, 1);
}

TEST(LayerPlanner, WeightLayoutDecidesTheGemmsAndTheColumnOrder) {
  const FakeLayer packed(2, 512, /*packed=*/true), v_low(2, 512, /*packed=*/false, /*v_low=*/true);
  EXPECT_TRUE(packed.plan().qkv_one_gemm);
  EXPECT_FALSE(packed.plan(pins("kv_gemm=separate")).qkv_one_gemm);
  EXPECT_TRUE(v_low.plan().v_first);
  EXPECT_EQ(v_low.plan().kv_batch_stride, (int64_t(1) << 26) / 2);  // v's weights to k's, in bf16 elements
  EXPECT_FALSE(v_low.plan(pins("kv_gemm=separate")).v_first);
  EXPECT_FALSE(v_low.plan(pins("kv_gemm=separate")).kv_batched);
}

gk::audio::AudioPlan audio_plan(int64_t b, int64_t s, gk_precision precision, const Overrides& ov = Overrides(),
                                bool capturing = false) {
  const gk_audio_qkv_config c{b, s, 1024, 8, 128, 1e-6f, precision};
  gk::audio::AudioPlan p;
  EXPECT_TRUE(gk::audio::plan_audio(c, hopper(), ov, capturing, size_t(32) << 20, &p).ok());
  return p;
}

TEST(AudioPlanner, SuiteDispatch) {
  using gk::audio::AudioPath;
  for (const auto& w : gk_testkit::builtin_suite("054").workloads) {
    const int64_t rows = w.batch * w.seq_len;
    SCOPED_TRACE("M=" + std::to_string(rows));
    const auto p = audio_plan(w.batch, w.seq_len, GK_PRECISION_TF32);
    const int64_t tiles = (rows + 127) / 128 * 24;
    if (rows >= 257) {
      // fp16 operands past two row tiles: with the suite's 8 heads there is no K split, so the ping-pong kernel runs.
      EXPECT_EQ(p.path, AudioPath::kSplitkF16);
      // The ping-pong kernel with two heads a tile, in clusters of two sharing the weights.
      EXPECT_TRUE(p.f16_pingpong);
      EXPECT_EQ(p.f16_heads, 2);
      EXPECT_EQ(p.f16_cluster, 2);
    } else {
      ASSERT_LE(tiles, 132);
      EXPECT_EQ(p.path, AudioPath::kSplitkTf32);
      // One launch: the activations rounded in shared memory (v's weights then too: no register rounding).
      EXPECT_FALSE(p.activations_prepass);
      EXPECT_FALSE(p.v_registers);
    }
    // The persistent kernel (pinned; by default past one wave below 257 rows, or where hidden is not a multiple of
    // 64): stream-K where the last round of whole units is at most 0.6 full, M = 2048 and 6184 in the suite.
    if (tiles > 132) {
      const auto pp = audio_plan(w.batch, w.seq_len, GK_PRECISION_TF32, pins("audio.tf32=persistent"));
      EXPECT_EQ(pp.grid.sk.run > 0, rows == 2048 || rows == 6184);
    }
    const auto e = audio_plan(w.batch, w.seq_len, GK_PRECISION_EXACT);
    // Two fp16 terms past 128 rows; 3xTF32 (activations by a pass) at (1, 128).
    EXPECT_EQ(e.path, rows > 128 ? AudioPath::kSplitkF16 : AudioPath::kSplitkTf32x3);
    if (rows <= 128) EXPECT_TRUE(e.activations_prepass);
  }
}

// The tf32 mode's fp16 route below 2048 rows only where its GEMM runs the ping-pong kernel: with 8 heads from 257
// rows (no K split), with 2 heads from 1409 (a K split up to 1408 rows), with 1 head from 2048 as before; past one
// wave with many heads below 257 rows, the persistent kernel; never where hidden is not a multiple of the fp16
// K-block.
TEST(AudioPlanner, Tf32FpSixteenRouteByRowsAndSplit) {
  using gk::audio::AudioPath;
  const auto plan = [](int64_t rows, int64_t hidden, int64_t heads) {
    const gk_audio_qkv_config c{1, rows, hidden, heads, 128, 1e-6f, GK_PRECISION_TF32};
    gk::audio::AudioPlan p;
    EXPECT_TRUE(gk::audio::plan_audio(c, hopper(), Overrides{}, false, size_t(32) << 20, &p).ok());
    return p;
  };
  EXPECT_EQ(plan(256, 1024, 8).path, AudioPath::kSplitkTf32);
  EXPECT_EQ(plan(257, 1024, 8).path, AudioPath::kSplitkF16);
  EXPECT_TRUE(plan(257, 1024, 8).f16_pingpong);
  EXPECT_EQ(plan(256, 1024, 24).path, AudioPath::kPersistentTf32) << "144 tiles, no fp16 below 257 rows";
  EXPECT_EQ(plan(1408, 1024, 2).path, AudioPath::kSplitkTf32) << "66 tiles take a K split";
  EXPECT_EQ(plan(1409, 1024, 2).path, AudioPath::kSplitkF16);
  EXPECT_EQ(plan(2047, 1024, 1).path, AudioPath::kSplitkTf32);
  EXPECT_EQ(plan(2048, 1024, 1).path, AudioPath::kSplitkF16);
  EXPECT_NE(plan(1024, 1056, 8).path, AudioPath::kSplitkF16) << "hidden 1056: no whole fp16 K-blocks";
  // Monotone in rows at each head count: once taken, the fp16 route stays.
  for (int64_t heads : {1, 2, 4, 8, 16, 24}) {
    bool seen = false;
    for (int64_t rows = 128; rows <= 4096; rows += 64) {
      const bool f16 = plan(rows, 1024, heads).path == AudioPath::kSplitkF16;
      EXPECT_FALSE(seen && !f16) << rows << " rows, " << heads << " heads";
      seen = seen || f16;
    }
    EXPECT_TRUE(seen) << heads << " heads";
  }
}

TEST(AudioPlanner, PinsAndCapture) {
  using gk::audio::AudioPath;
  EXPECT_EQ(audio_plan(1, 128, GK_PRECISION_TF32, pins("audio.tf32=cublas")).path, AudioPath::kCublas);
  EXPECT_EQ(audio_plan(1, 4096, GK_PRECISION_TF32, pins("audio.tf32=splitk")).path, AudioPath::kSplitkTf32);
  EXPECT_EQ(audio_plan(1, 128, GK_PRECISION_TF32, pins("audio.tf32=persistent")).path, AudioPath::kPersistentTf32);
  EXPECT_EQ(audio_plan(2, 1024, GK_PRECISION_TF32, pins("audio.tf32=persistent,audio.stream_k=off")).grid.sk.run, 0);
  EXPECT_FALSE(audio_plan(1, 128, GK_PRECISION_TF32, pins("audio.activations=smem")).activations_prepass);
  const auto pass = audio_plan(1, 128, GK_PRECISION_TF32, pins("audio.activations=prepass"));
  EXPECT_TRUE(pass.activations_prepass);
  EXPECT_EQ(pass.v_registers, pass.split > 1);
  EXPECT_FALSE(audio_plan(1, 128, GK_PRECISION_TF32, pins("audio.v_weights=smem")).v_registers);
  EXPECT_EQ(audio_plan(1, 128, GK_PRECISION_EXACT, pins("audio.exact=cublas")).path, AudioPath::kCublas);
  // The kernel's own v rounding hands slices over under the call's epoch: never under capture.
  EXPECT_TRUE(audio_plan(1, 8192, GK_PRECISION_TF32, pins("audio.tf32=persistent,audio.v_round=kernel")).v_round_in_kernel);
  EXPECT_FALSE(audio_plan(1, 8192, GK_PRECISION_TF32, pins("audio.tf32=persistent,audio.v_round=kernel"), true).v_round_in_kernel);
  EXPECT_FALSE(audio_plan(1, 8192, GK_PRECISION_TF32, pins("audio.tf32=persistent,audio.v_round=pass")).v_round_in_kernel);
}

// A call of a pass and its GEMM goes out as one graph launch, unless the stream is capturing or launch=stream is
// pinned; a call of one kernel has no launch choice (and prints none).
TEST(AudioPlanner, TwoLaunchCallsGoOutAsOneGraph) {
  using gk::audio::plan_launches;
  const auto text = [](const gk::audio::AudioPlan& p) { return gk::detail::format_overrides(p.chosen); };
  const auto pass = audio_plan(4, 256, GK_PRECISION_TF32, pins("audio.tf32=persistent,audio.v_round=pass"));
  EXPECT_EQ(plan_launches(pass), 2);
  EXPECT_TRUE(pass.graph);
  EXPECT_NE(text(pass).find("launch=graph"), std::string::npos) << text(pass);
  const auto captured = audio_plan(4, 256, GK_PRECISION_TF32, pins("audio.tf32=persistent,audio.v_round=pass"), true);
  EXPECT_FALSE(captured.graph);
  EXPECT_NE(text(captured).find("launch=stream"), std::string::npos) << text(captured);
  const Overrides stream = pins("audio.tf32=persistent,audio.v_round=pass,launch=stream");
  EXPECT_FALSE(audio_plan(4, 256, GK_PRECISION_TF32, stream).graph);
  const auto f16 = audio_plan(8, 1024, GK_PRECISION_TF32);  // fp16 operands: the pass, then the GEMM
  EXPECT_EQ(plan_launches(f16), 2);
  EXPECT_TRUE(f16.graph);
  const auto one = audio_plan(1, 128, GK_PRECISION_TF32);  // the split-K kernel rounding in shared memory
  EXPECT_EQ(plan_launches(one), 1);
  EXPECT_FALSE(one.graph);
  EXPECT_EQ(text(one).find("launch="), std::string::npos) << text(one);
  EXPECT_EQ(plan_launches(audio_plan(1, 128, GK_PRECISION_TF32, pins("audio.tf32=cublas"))), 0);
  const auto exact = audio_plan(1, 128, GK_PRECISION_EXACT);  // 3xTF32 after its activations' pass
  EXPECT_EQ(plan_launches(exact), 2);
  EXPECT_TRUE(exact.graph);
}

// The fp16 pins (audio.tf32=f16, audio.exact=f16) take the fp16 path while its activations fit the workspace's
// bound, and print themselves; past the bound the planner keeps its own choice.
TEST(AudioPlanner, Fp16PinsTakeTheFp16PathWithinTheBound) {
  for (const gk_precision prec : {GK_PRECISION_TF32, GK_PRECISION_EXACT}) {
    const int terms = prec == GK_PRECISION_TF32 ? 1 : 2;
    const int64_t cap = (int64_t(256) << 20) / (2 * terms * 1024);
    for (const int64_t rows : {int64_t(128), int64_t(8192), cap, cap + 1}) {
      const gk_audio_qkv_config c{1, rows, 1024, 8, 128, 1e-6f, prec};
      gk::audio::AudioPlan p;
      ASSERT_TRUE(gk::audio::plan_audio(c, hopper(), pins("audio.tf32=f16,audio.exact=f16"), false, 0, &p).ok());
      const bool f16 = rows <= cap;
      EXPECT_EQ(p.path == gk::audio::AudioPath::kSplitkF16, f16) << rows << " rows, terms " << terms;
      if (f16) {
        EXPECT_NE(gk::detail::format_overrides(p.chosen).find(terms == 1 ? "audio.tf32=f16" : "audio.exact=f16"),
                  std::string::npos);
      }
    }
  }
}

// audio.f16_tile=pair gives the one-term fp16 kernel two heads a CTA where it has no K split and an even head
// count, and prints itself there; elsewhere (two terms, a K split, odd heads) the one-head tile stands, unprinted.
TEST(AudioPlanner, Fp16PairTileOnlyWhereItApplies) {
  for (const gk_precision prec : {GK_PRECISION_TF32, GK_PRECISION_EXACT}) {
    for (const int64_t rows : {int64_t(128), int64_t(8192)}) {
      for (const int64_t heads : {int64_t(8), int64_t(7)}) {
        const gk_audio_qkv_config c{1, rows, 1024, heads, 128, 1e-6f, prec};
        gk::audio::AudioPlan p;
        ASSERT_TRUE(
            gk::audio::plan_audio(c, hopper(), pins("audio.tf32=f16,audio.exact=f16,audio.f16_tile=pair"), false, 0, &p)
                .ok());
        ASSERT_EQ(p.path, gk::audio::AudioPath::kSplitkF16);
        const bool pair = prec == GK_PRECISION_TF32 && p.split == 1 && heads % 2 == 0;
        EXPECT_EQ(p.f16_heads, pair ? 2 : 1) << rows << " rows, " << heads << " heads, split " << p.split;
        const std::string printed = gk::detail::format_overrides(p.chosen);
        EXPECT_EQ(printed.find("audio.f16_tile=pair") != std::string::npos, pair) << printed;
      }
    }
  }
  const gk_audio_qkv_config big{1, 8192, 1024, 8, 128, 1e-6f, GK_PRECISION_TF32};
  gk::audio::AudioPlan p;
  ASSERT_TRUE(gk::audio::plan_audio(big, hopper(), pins("audio.tf32=f16,audio.f16_tile=pair"), false, 0, &p).ok());
  EXPECT_EQ(p.f16_heads, 2) << "8192 rows take no K split";
}

// The one-term fp16 path runs the ping-pong kernel wherever it has no K split, for either tile; two terms or a K
// split run the cooperative kernel.
TEST(AudioPlanner, Fp16PingpongWhereOneTermHasNoSplit) {
  for (const gk_precision prec : {GK_PRECISION_TF32, GK_PRECISION_EXACT}) {
    for (const int64_t rows : {int64_t(128), int64_t(640), int64_t(768), int64_t(8192)}) {
      for (const char* tile : {"head", "pair"}) {
        const gk_audio_qkv_config c{1, rows, 1024, 8, 128, 1e-6f, prec};
        const std::string spec = std::string("audio.tf32=f16,audio.exact=f16,audio.f16_tile=") + tile;
        gk::audio::AudioPlan p;
        ASSERT_TRUE(gk::audio::plan_audio(c, hopper(), pins(spec.c_str()), false, 0, &p).ok());
        ASSERT_EQ(p.path, gk::audio::AudioPath::kSplitkF16);
        EXPECT_EQ(p.f16_pingpong, prec == GK_PRECISION_TF32 && p.split == 1) << rows << " rows, " << tile;
      }
    }
  }
  const gk_audio_qkv_config c{1, 8192, 1024, 8, 128, 1e-6f, GK_PRECISION_TF32};
  gk::audio::AudioPlan p;
  ASSERT_TRUE(gk::audio::plan_audio(c, hopper(), pins("audio.tf32=f16"), false, 0, &p).ok());
  EXPECT_EQ(p.split, 1);
  EXPECT_TRUE(p.f16_pingpong);
  EXPECT_EQ(p.f16_cluster, 2) << "multicast by default where clusters of two are resident";
  const gk_audio_qkv_config few{1, 128, 1024, 8, 128, 1e-6f, GK_PRECISION_TF32};
  ASSERT_TRUE(gk::audio::plan_audio(few, hopper(), pins("audio.tf32=f16"), false, 0, &p).ok());
  EXPECT_GT(p.split, 1) << "one row tile: a K split";
  EXPECT_FALSE(p.f16_pingpong);
}

// audio.f16_multicast=weights puts the ping-pong kernel's CTAs in clusters of two where that kernel runs and such
// clusters are resident, and prints itself there; a K split (the cooperative kernel), or no resident cluster, leaves
// it off.
TEST(AudioPlanner, Fp16MulticastOnlyOnThePingpongKernel) {
  for (const int64_t rows : {int64_t(128), int64_t(8192)}) {
    for (const char* tile : {"head", "pair"}) {
      for (const bool resident : {false, true}) {
        DeviceInfo d = hopper();
        if (!resident) d.audio_f16_pingpong_clusters[0] = d.audio_f16_pingpong_clusters[1] = 0;
        const gk_audio_qkv_config c{1, rows, 1024, 8, 128, 1e-6f, GK_PRECISION_TF32};
        const std::string spec = std::string("audio.tf32=f16,audio.f16_multicast=weights,audio.f16_tile=") + tile;
        gk::audio::AudioPlan p;
        ASSERT_TRUE(gk::audio::plan_audio(c, d, pins(spec.c_str()), false, 0, &p).ok());
        const bool on = p.f16_pingpong && resident;
        EXPECT_EQ(p.f16_pingpong, rows == 8192) << spec;
        EXPECT_EQ(p.f16_cluster, on ? 2 : 1) << spec;
        EXPECT_EQ(p.f16_clusters, resident ? 66 : 0) << spec;
        const std::string printed = gk::detail::format_overrides(p.chosen);
        EXPECT_EQ(printed.find("audio.f16_multicast=weights") != std::string::npos, on) << printed;
      }
    }
  }
}

// Unpinned, the one-term fp16 path without a K split runs the ping-pong kernel with two heads a tile and multicast
// weights (the fastest measured form); with no resident cluster, or multicast pinned off, one head a tile (two heads
// without multicast measured slower). A K split keeps the cooperative kernel.
TEST(AudioPlanner, Fp16DefaultsToPingpongPairMulticast) {
  for (const bool resident : {true, false}) {
    for (const char* extra : {"", ",audio.f16_multicast=off"}) {
      DeviceInfo d = hopper();
      if (!resident) d.audio_f16_pingpong_clusters[0] = d.audio_f16_pingpong_clusters[1] = 0;
      const std::string spec = std::string("audio.tf32=f16") + extra;
      for (const int64_t heads : {int64_t(8), int64_t(7)}) {
        const gk_audio_qkv_config c{1, 8192, 1024, heads, 128, 1e-6f, GK_PRECISION_TF32};
        gk::audio::AudioPlan p;
        ASSERT_TRUE(gk::audio::plan_audio(c, d, pins(spec.c_str()), false, 0, &p).ok());
        ASSERT_EQ(p.split, 1);
        EXPECT_TRUE(p.f16_pingpong) << spec;
        const bool multicast = resident && *extra == '\0';
        EXPECT_EQ(p.f16_cluster, multicast ? 2 : 1) << spec << ", " << heads << " heads";
        EXPECT_EQ(p.f16_heads, multicast && heads % 2 == 0 ? 2 : 1) << spec << ", " << heads << " heads";
      }
    }
  }
  for (const auto& w : gk_testkit::builtin_suite("054").workloads) {
    const auto p = audio_plan(w.batch, w.seq_len, GK_PRECISION_TF32);
    if (p.path != gk::audio::AudioPath::kSplitkF16) continue;
    EXPECT_EQ(p.f16_pingpong, p.split == 1) << w.batch << "x" << w.seq_len;
    if (p.split == 1) EXPECT_EQ(p.f16_heads * p.f16_cluster, 4) << w.batch << "x" << w.seq_len;
  }
}

TEST(AudioPlanner, PrintedPlanPinsTheSamePlan) {
  for (const auto& w : gk_testkit::builtin_suite("054").workloads) {
    for (const gk_precision prec : {GK_PRECISION_TF32, GK_PRECISION_EXACT}) {
      const auto p = audio_plan(w.batch, w.seq_len, prec);
      const std::string printed = gk::detail::format_overrides(p.chosen);
      const auto again = audio_plan(w.batch, w.seq_len, prec, pins(printed.c_str()));
      EXPECT_EQ(gk::detail::format_overrides(again.chosen), printed);
      EXPECT_EQ(again.path, p.path);
      EXPECT_EQ(again.split, p.split);
      EXPECT_EQ(again.grid.sk.run, p.grid.sk.run);
      EXPECT_EQ(again.v_round_in_kernel, p.v_round_in_kernel);
      EXPECT_EQ(again.f16_heads, p.f16_heads);
      EXPECT_EQ(again.f16_pingpong, p.f16_pingpong);
      EXPECT_EQ(again.f16_cluster, p.f16_cluster);
    }
  }
}

}  // namespace

namespace {

// The attention planner at head_dim 256 (docs/dispatch.md): the Hopper kernel with its 64-key tiles at every grid,
// its output by TMA stores and the running-maximum softmax (the fixed reference is built at 128 only), the sm80-class
// kernel for an additive mask; head_dim 128 keeps its 128 x 128 tiles and takes the sm80-class kernel on a narrow
// grid.
gk::gemma3::AttentionShape attention_shape(int head_dim, int seq_len, int q_heads, int group,
                                           gk::gemma3::MaskMode mask) {
  gk::gemma3::AttentionShape s;
  s.batch = 1;
  s.seq_len = seq_len;
  s.num_q_heads = q_heads;
  s.group_size = group;
  s.head_dim = head_dim;
  s.mask = mask;
  s.softcap = true;
  s.softcap_out = 50.f * 1.4426950f;
  s.sm90_layout = true;
  s.o_tma = true;
  return s;
}

TEST(AttentionPlanner, HeadDim256TakesTheHopperKernelWithItsKeyTiles) {
  using gk::gemma3::AttentionKernel;
  using gk::gemma3::MaskMode;
  const auto plan = [](const gk::gemma3::AttentionShape& s, const char* pin = "") {
    gk::gemma3::AttentionPlan p;
    EXPECT_TRUE(gk::gemma3::plan_attention(s, hopper(), pins(pin), &p).ok());
    return p;
  };
  for (const MaskMode mask : {MaskMode::kCausal, MaskMode::kSliding, MaskMode::kNone}) {
    const auto p = plan(attention_shape(256, 8192, 16, 2, mask));
    EXPECT_EQ(p.kernel, AttentionKernel::kSm90);
    EXPECT_EQ(p.block_m, 128);
    EXPECT_EQ(p.block_n, 64);
    EXPECT_TRUE(p.o_tma);           // one staging buffer, taken in turn by the two consumer warpgroups
    EXPECT_FALSE(p.fixed_softmax);  // the fixed-reference softmax is built at 128 only
  }
  const auto additive = plan(attention_shape(256, 8192, 16, 2, MaskMode::kAdditive), "attention.kernel=sm90");
  EXPECT_EQ(additive.kernel, AttentionKernel::kSm80);
  EXPECT_EQ(additive.block_n, 64);
  // 8 tiles of 128 rows for 132 SMs: at head_dim 256 still the Hopper kernel (faster per tile than the 64-row
  // kernel's extra CTAs make up), at 128 the 64-row kernel with twice the CTAs.
  EXPECT_EQ(plan(attention_shape(256, 1024, 1, 1, MaskMode::kCausal)).kernel, AttentionKernel::kSm90);
  EXPECT_EQ(plan(attention_shape(256, 128, 1, 1, MaskMode::kSliding)).kernel, AttentionKernel::kSm90);
  EXPECT_EQ(plan(attention_shape(128, 1024, 1, 1, MaskMode::kCausal)).kernel, AttentionKernel::kSm80);
  const auto d128 = plan(attention_shape(128, 8192, 24, 3, MaskMode::kCausal));
  EXPECT_EQ(d128.kernel, AttentionKernel::kSm90);
  EXPECT_EQ(d128.block_n, 128);
  EXPECT_TRUE(d128.o_tma);
}

// A chunk of new tokens over a key/value cache, as the fused layer's cached call lays it out: q the packed rows'
// first columns, k and v caches [B][Hkv][capacity][D]. The Hopper kernel's cached form takes it (causal or a
// window) where the grid is wide enough or it is pinned, with one tile per head and the running maximum, left
// padding included; no mask, or caches of another layout go to the sm80-class kernel.
TEST(AttentionPlanner, CachedChunksTakeTheHopperKernelWhereItsLayoutHolds) {
  using gk::gemma3::AttentionKernel;
  using gk::gemma3::MaskMode;
  alignas(16) static __nv_bfloat16 q[16], k_cache[16], v_cache[16], out[16];
  static const int lens[2] = {0, 0}, starts[2] = {0, 0};
  const auto params = [&](int D, int S, MaskMode mask) {
    gk::gemma3::AttentionParams p{};
    const int Hq = 16, Hkv = 8, capacity = 8192, width = (Hq + 2 * Hkv) * D;
    p.q = q, p.k = k_cache, p.v = v_cache, p.o = out;
    p.q_token_stride = width, p.q_head_stride = D, p.q_batch_stride = int64_t(S) * width;
    p.k_token_stride = p.v_token_stride = D;
    p.k_head_stride = p.v_head_stride = int64_t(capacity) * D;
    p.k_batch_stride = p.v_batch_stride = int64_t(Hkv) * capacity * D;
    p.o_token_stride = Hq * D, p.o_head_stride = D, p.o_batch_stride = int64_t(S) * Hq * D;
    p.batch = 2, p.seq_len = S, p.num_q_heads = Hq, p.group_size = Hq / Hkv;
    p.mask_mode = mask, p.window = mask == MaskMode::kSliding ? 1024 : 0;
    p.softcap = true, p.softcap_out = 50.f * 1.4426950f;
    p.kv_lens = lens, p.kv_capacity = capacity;
    return p;
  };
  const auto plan = [](const gk::gemma3::AttentionParams& p, int D, const char* pin = "") {
    gk::gemma3::AttentionPlan plan;
    EXPECT_TRUE(gk::gemma3::plan_attention(gk::gemma3::attention_shape(p, D), hopper(), pins(pin), &plan).ok());
    return plan;
  };
  for (const int D : {128, 256}) {
    for (const MaskMode mask : {MaskMode::kCausal, MaskMode::kSliding}) {
      const auto p = plan(params(D, 2048, mask), D);
      EXPECT_EQ(p.kernel, AttentionKernel::kSm90) << D;
      EXPECT_EQ(p.tail_rows, 0) << D;
      EXPECT_FALSE(p.fixed_softmax) << D;  // the cached form keeps the running maximum
    }
    auto padded = params(D, 2048, MaskMode::kCausal);
    padded.kv_starts = starts;
    EXPECT_EQ(plan(padded, D, "attention.kernel=sm90").kernel, AttentionKernel::kSm90) << D;  // left padding
    EXPECT_EQ(plan(params(D, 2048, MaskMode::kNone), D, "attention.kernel=sm90").kernel, AttentionKernel::kSm80);
    auto heads = params(D, 2048, MaskMode::kCausal);  // gemma3_attend's head-major query [B][Hq][S][D]
    heads.q_token_stride = D, heads.q_head_stride = int64_t(2048) * D, heads.q_batch_stride = 16 * heads.q_head_stride;
    EXPECT_EQ(plan(heads, D).kernel, AttentionKernel::kSm90) << D;
    EXPECT_TRUE(plan(heads, D).q_heads) << D;
    EXPECT_FALSE(plan(params(D, 2048, MaskMode::kCausal), D).q_heads) << D;
    auto strided = params(D, 2048, MaskMode::kCausal);  // a cache whose heads are not capacity x D apart
    strided.k_head_stride += D;
    EXPECT_EQ(plan(strided, D, "attention.kernel=sm90").kernel, AttentionKernel::kSm80) << D;
  }
  // One query head in token-major rows of exactly head_dim: head stride D, so the packed rows' reading, not the
  // head-major one (whose slices would then be D apart instead of S x D).
  auto one_head = params(128, 2048, MaskMode::kCausal);
  one_head.num_q_heads = 1, one_head.group_size = 1;
  one_head.q_token_stride = 128, one_head.q_batch_stride = int64_t(2048) * 128;
  one_head.k_batch_stride = one_head.v_batch_stride = one_head.k_head_stride;
  one_head.o_token_stride = 128, one_head.o_batch_stride = int64_t(2048) * 128;
  const auto one = plan(one_head, 128, "attention.kernel=sm90");
  EXPECT_EQ(one.kernel, AttentionKernel::kSm90);
  EXPECT_FALSE(one.q_heads);
  // A narrow grid at head_dim 128 keeps the 64-row kernel unless the Hopper kernel is pinned, as without a cache.
  EXPECT_EQ(plan(params(128, 100, MaskMode::kCausal), 128).kernel, AttentionKernel::kSm80);
  EXPECT_EQ(plan(params(128, 100, MaskMode::kCausal), 128, "attention.kernel=sm90").kernel, AttentionKernel::kSm90);
}

}  // namespace
