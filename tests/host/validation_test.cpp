// Every rejection of the public API, table-driven: each row breaks one thing in an otherwise valid call and
// names the status and the text (the offending argument) the message must contain. Runs without a GPU: the
// checks happen before anything touches the device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gk/gk.h"
#include "gk/gk.hpp"

namespace {

// Fake device addresses, 64 GiB apart so no two tensors of a valid call overlap.
void* fake_ptr(int slot) { return reinterpret_cast<void*>(uintptr_t(0x100000000000ull) + uintptr_t(slot) * (1ull << 36)); }

gk_tensor make(int slot, gk_dtype dtype, std::vector<int64_t> shape) {
  return gk_tensor_contiguous(fake_ptr(slot), dtype, static_cast<int32_t>(shape.size()), shape.data());
}

struct Gemma3Call {
  gk_gemma3_attention_config c{};
  gk_gemma3_attention_tensors t{};
  Gemma3Call() {
    c = {2, 293, 3072, 24, 8, 128, 50.f, 1e-6f, 1.f, 0.f, GK_MASK_CAUSAL};
    refresh();
  }
  // Rebuilds every tensor from the config.
  void refresh() {
    const int64_t B = c.batch, S = c.seq_len, D = c.head_dim;
    t.hidden_states = make(1, GK_DTYPE_BF16, {B, S, c.hidden});
    t.cos = make(2, GK_DTYPE_BF16, {B, S, D});
    t.sin = make(3, GK_DTYPE_BF16, {B, S, D});
    t.attention_mask = make(4, GK_DTYPE_BF16, {B, 1, S, S});
    t.q_proj_weight = make(5, GK_DTYPE_BF16, {c.num_q_heads * D, c.hidden});
    t.k_proj_weight = make(6, GK_DTYPE_BF16, {c.num_kv_heads * D, c.hidden});
    t.v_proj_weight = make(7, GK_DTYPE_BF16, {c.num_kv_heads * D, c.hidden});
    t.o_proj_weight = make(8, GK_DTYPE_BF16, {c.hidden, c.num_q_heads * D});
    t.q_norm_weight = make(9, GK_DTYPE_BF16, {D});
    t.k_norm_weight = make(10, GK_DTYPE_BF16, {D});
    t.out = make(11, GK_DTYPE_BF16, {B, S, c.hidden});
  }
};

struct Gemma3Case {
  const char* what;
  std::function<void(Gemma3Call&)> mutate;
  gk_status code;
  const char* message_part;
};

void PrintTo(const Gemma3Case& c, std::ostream* os) { *os << c.what; }

class Gemma3Rejects : public ::testing::TestWithParam<Gemma3Case> {};

TEST_P(Gemma3Rejects, ThroughBothApis) {
  Gemma3Call call;
  GetParam().mutate(call);
  const gk::Status s = gk::gemma3_attention_check(call.c, call.t);
  EXPECT_EQ(s.code(), GetParam().code) << s.message();
  EXPECT_NE(s.message().find(GetParam().message_part), std::string::npos) << s.message();
  EXPECT_EQ(s.message().rfind("gemma3_attention: ", 0), 0u) << s.message();
  // The C ABI returns the same status and leaves the same message for this thread.
  EXPECT_EQ(gk_gemma3_attention_check(&call.c, &call.t), GetParam().code);
  EXPECT_EQ(std::string(gk_last_error_message()), s.message());
}

const auto set = [](auto fn) { return std::function<void(Gemma3Call&)>(fn); };

INSTANTIATE_TEST_SUITE_P(
    Table, Gemma3Rejects,
    ::testing::Values(
        Gemma3Case{"batch0", set([](Gemma3Call& x) { x.c.batch = 0; }), GK_STATUS_INVALID_ARGUMENT, "batch must be >= 1"},
        Gemma3Case{"seq0", set([](Gemma3Call& x) { x.c.seq_len = 0; }), GK_STATUS_INVALID_ARGUMENT, "seq_len must be >= 1"},
        Gemma3Case{"seq_huge", set([](Gemma3Call& x) { x.c.seq_len = int64_t(1) << 25; }), GK_STATUS_INVALID_ARGUMENT,
                   "seq_len 33554432 exceeds"},
        Gemma3Case{"rows_overflow", set([](Gemma3Call& x) { x.c.batch = int64_t(1) << 20; x.c.seq_len = int64_t(1) << 20; }),
                   GK_STATUS_INVALID_ARGUMENT, "batch*seq_len"},
        Gemma3Case{"hidden", set([](Gemma3Call& x) { x.c.hidden = 100; }), GK_STATUS_INVALID_ARGUMENT, "hidden must be"},
        Gemma3Case{"kv0", set([](Gemma3Call& x) { x.c.num_kv_heads = 0; }), GK_STATUS_INVALID_ARGUMENT, "num_kv_heads"},
        Gemma3Case{"q_not_multiple", set([](Gemma3Call& x) { x.c.num_q_heads = 25; }), GK_STATUS_INVALID_ARGUMENT,
                   "num_q_heads (25)"},
        Gemma3Case{"group16", set([](Gemma3Call& x) { x.c.num_q_heads = 128; }), GK_STATUS_NOT_SUPPORTED, "group size"},
        Gemma3Case{"head_dim96", set([](Gemma3Call& x) { x.c.head_dim = 96; }), GK_STATUS_NOT_SUPPORTED,
                   "head_dim 96 is not supported (supported: 128, 256)"},
        Gemma3Case{"head_dim0", set([](Gemma3Call& x) { x.c.head_dim = 0; }), GK_STATUS_INVALID_ARGUMENT, "head_dim"},
        Gemma3Case{"softcap_neg", set([](Gemma3Call& x) { x.c.softcap = -1.f; }), GK_STATUS_INVALID_ARGUMENT, "softcap"},
        Gemma3Case{"softcap_nan", set([](Gemma3Call& x) { x.c.softcap = NAN; }), GK_STATUS_INVALID_ARGUMENT, "softcap"},
        Gemma3Case{"eps_nan", set([](Gemma3Call& x) { x.c.rms_norm_eps = NAN; }), GK_STATUS_INVALID_ARGUMENT, "rms_norm_eps"},
        Gemma3Case{"offset_inf", set([](Gemma3Call& x) { x.c.norm_weight_offset = INFINITY; }), GK_STATUS_INVALID_ARGUMENT,
                   "norm_weight_offset"},
        Gemma3Case{"scale_neg", set([](Gemma3Call& x) { x.c.query_scale = -0.5f; }), GK_STATUS_INVALID_ARGUMENT, "query_scale"},
        Gemma3Case{"mask_mode", set([](Gemma3Call& x) { x.c.mask_mode = static_cast<gk_mask_mode>(7); }),
                   GK_STATUS_INVALID_ARGUMENT, "mask_mode 7"},
        Gemma3Case{"window_neg", set([](Gemma3Call& x) { x.c.sliding_window = -1; }), GK_STATUS_INVALID_ARGUMENT,
                   "sliding_window must be >= 0"},
        Gemma3Case{"window_additive", set([](Gemma3Call& x) { x.c.mask_mode = GK_MASK_ADDITIVE; x.c.sliding_window = 8; }),
                   GK_STATUS_NOT_SUPPORTED, "causal mask mode only"},
        Gemma3Case{"window_none", set([](Gemma3Call& x) { x.c.mask_mode = GK_MASK_NONE; x.c.sliding_window = 8; }),
                   GK_STATUS_NOT_SUPPORTED, "causal mask mode only"},
        Gemma3Case{"hs_null", set([](Gemma3Call& x) { x.t.hidden_states.data = nullptr; }), GK_STATUS_INVALID_ARGUMENT,
                   "hidden_states: data pointer is null"},
        Gemma3Case{"hs_dtype", set([](Gemma3Call& x) { x.t.hidden_states.dtype = GK_DTYPE_F32; }),
                   GK_STATUS_INVALID_ARGUMENT, "hidden_states: dtype is f32, expected bf16"},
        Gemma3Case{"hs_shape", set([](Gemma3Call& x) { x.t.hidden_states.shape[2] = 3071; }), GK_STATUS_INVALID_ARGUMENT,
                   "hidden_states: shape is [2, 293, 3071], expected [2, 293, 3072]"},
        Gemma3Case{"cos_shape", set([](Gemma3Call& x) { x.t.cos.shape[1] = 292; }), GK_STATUS_INVALID_ARGUMENT, "cos: shape"},
        Gemma3Case{"sin_rank", set([](Gemma3Call& x) { x.t.sin.ndim = 2; }), GK_STATUS_INVALID_ARGUMENT,
                   "sin: has 2 dimensions"},
        Gemma3Case{"rank5", set([](Gemma3Call& x) { x.t.sin.ndim = 5; }), GK_STATUS_INVALID_ARGUMENT, "sin: has 5 dimensions"},
        Gemma3Case{"wq_stride", set([](Gemma3Call& x) { x.t.q_proj_weight.strides[0] = 4096; }),
                   GK_STATUS_INVALID_ARGUMENT, "q_proj_weight: stride[0] is 4096, expected 3072"},
        Gemma3Case{"wk_misaligned",
                   set([](Gemma3Call& x) { x.t.k_proj_weight.data = static_cast<char*>(x.t.k_proj_weight.data) + 2; }),
                   GK_STATUS_INVALID_ARGUMENT, "k_proj_weight: data pointer"},
        Gemma3Case{"wv_shape", set([](Gemma3Call& x) { x.t.v_proj_weight.shape[0] = 3072; }), GK_STATUS_INVALID_ARGUMENT,
                   "v_proj_weight: shape"},
        Gemma3Case{"wo_dtype", set([](Gemma3Call& x) { x.t.o_proj_weight.dtype = GK_DTYPE_F16; }),
                   GK_STATUS_INVALID_ARGUMENT, "o_proj_weight: dtype is f16"},
        Gemma3Case{"qn_null", set([](Gemma3Call& x) { x.t.q_norm_weight.data = nullptr; }), GK_STATUS_INVALID_ARGUMENT,
                   "q_norm_weight"},
        Gemma3Case{"kn_shape", set([](Gemma3Call& x) { x.t.k_norm_weight.shape[0] = 64; }), GK_STATUS_INVALID_ARGUMENT,
                   "k_norm_weight: shape"},
        Gemma3Case{"out_shape", set([](Gemma3Call& x) { x.t.out.shape[0] = 1; }), GK_STATUS_INVALID_ARGUMENT, "out: shape"},
        Gemma3Case{"out_dtype_invalid", set([](Gemma3Call& x) { x.t.out.dtype = GK_DTYPE_INVALID; }),
                   GK_STATUS_INVALID_ARGUMENT, "out: dtype is invalid"},
        Gemma3Case{"out_aliases_input", set([](Gemma3Call& x) { x.t.out.data = x.t.hidden_states.data; }),
                   GK_STATUS_INVALID_ARGUMENT, "out overlaps input hidden_states"},
        Gemma3Case{"mask_null_additive",
                   set([](Gemma3Call& x) { x.c.mask_mode = GK_MASK_ADDITIVE; x.t.attention_mask.data = nullptr; }),
                   GK_STATUS_INVALID_ARGUMENT, "attention_mask: data pointer is null"},
        Gemma3Case{"mask_rank_additive",
                   set([](Gemma3Call& x) { x.c.mask_mode = GK_MASK_ADDITIVE; x.t.attention_mask.ndim = 3; }),
                   GK_STATUS_INVALID_ARGUMENT, "attention_mask: has 3 dimensions"},
        Gemma3Case{"mask_too_big",
                   set([](Gemma3Call& x) {
                     x.c.mask_mode = GK_MASK_ADDITIVE;
                     x.c.batch = 1024;
                     x.c.seq_len = int64_t(1) << 20;  // B*S = 2^30 rows, B*S*S = 2^50 mask elements
                     x.refresh();
                   }),
                   GK_STATUS_INVALID_ARGUMENT, "attention_mask"},
        Gemma3Case{"mask_seq_len_beyond_additive_limit",
                   set([](Gemma3Call& x) {
                     x.c.mask_mode = GK_MASK_ADDITIVE;
                     x.c.seq_len = int64_t(65535) * 64 + 1;
                     x.refresh();
                   }),
                   GK_STATUS_NOT_SUPPORTED, "an additive mask supports seq_len up to 4194240"}));

TEST(Gemma3Accepts, ValidCallsIncludingIgnoredMask) {
  Gemma3Call call;
  EXPECT_TRUE(gk::gemma3_attention_check(call.c, call.t).ok());
  // Causal and none modes never read the mask: a null or misshapen mask descriptor is fine.
  call.t.attention_mask = gk_tensor{};
  EXPECT_TRUE(gk::gemma3_attention_check(call.c, call.t).ok());
  call.c.mask_mode = GK_MASK_NONE;
  EXPECT_TRUE(gk::gemma3_attention_check(call.c, call.t).ok());
  // head_dim 256 (the 1B/4B/12B models').
  call.c.head_dim = 256;
  call.refresh();
  EXPECT_TRUE(gk::gemma3_attention_check(call.c, call.t).ok());
  call.c.head_dim = 128;
  call.refresh();
  // A sliding window in causal mode, of any length (one past S is the causal mask).
  call.c.mask_mode = GK_MASK_CAUSAL;
  for (int64_t w : {1, 2, 1 << 20}) {
    call.c.sliding_window = w;
    EXPECT_TRUE(gk::gemma3_attention_check(call.c, call.t).ok()) << w;
  }
  call.c.sliding_window = 0;
  // Size-1 dimensions may carry any stride (as frameworks produce them).
  call.c.batch = 1;
  call.c.mask_mode = GK_MASK_CAUSAL;
  call.refresh();
  call.t.hidden_states.strides[0] = 12345;
  EXPECT_TRUE(gk::gemma3_attention_check(call.c, call.t).ok());
  // Group sizes 1..8 and S = 1.
  for (int64_t q : {8, 16, 32, 64}) {
    call.c.num_q_heads = q;
    call.c.seq_len = 1;
    call.refresh();
    EXPECT_TRUE(gk::gemma3_attention_check(call.c, call.t).ok()) << q;
  }
}

TEST(Gemma3Rejects, NullArgumentsAndForwardPreconditions) {
  Gemma3Call call;
  EXPECT_EQ(gk_gemma3_attention_check(nullptr, &call.t), GK_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(gk_last_error_message(), "gemma3_attention: config is null");
  EXPECT_EQ(gk_gemma3_attention_check(&call.c, nullptr), GK_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(gk_last_error_message(), "gemma3_attention: tensors is null");
  EXPECT_EQ(gk_gemma3_attention_workspace_size(&call.c, nullptr), GK_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(gk_last_error_message(), "gemma3_attention: bytes is null");

  size_t need = 0;
  ASSERT_EQ(gk_gemma3_attention_workspace_size(&call.c, &need), GK_STATUS_SUCCESS);
  EXPECT_STREQ(gk_last_error_message(), "");
  // q|k|v and the attention output in bf16, plus the GEMM workspace.
  const size_t rows = 2 * 293;
  EXPECT_GE(need, rows * (24 + 16) * 128 * 2 + rows * 24 * 128 * 2);

  void* ws = fake_ptr(20);
  EXPECT_EQ(gk_gemma3_attention_forward(nullptr, &call.c, &call.t, nullptr, need, nullptr), GK_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(gk_last_error_message(), "gemma3_attention: workspace is null");
  EXPECT_EQ(gk_gemma3_attention_forward(nullptr, &call.c, &call.t, static_cast<char*>(ws) + 16, need, nullptr),
            GK_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error_message()).find("not 256-byte aligned"), std::string::npos);
  EXPECT_EQ(gk_gemma3_attention_forward(nullptr, &call.c, &call.t, ws, need - 1, nullptr),
            GK_STATUS_WORKSPACE_TOO_SMALL);
  EXPECT_NE(std::string(gk_last_error_message()).find("this call needs"), std::string::npos);
  EXPECT_EQ(gk_gemma3_attention_forward(nullptr, &call.c, &call.t, ws, need, nullptr), GK_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(gk_last_error_message(), "gemma3_attention: handle is null");
  // Argument errors come first: a bad tensor is reported even with a null handle.
  call.t.sin.data = nullptr;
  EXPECT_EQ(gk_gemma3_attention_forward(nullptr, &call.c, &call.t, ws, need, nullptr), GK_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(gk_last_error_message(), "gemma3_attention: sin: data pointer is null");
  // The cached plan query: a null cache is named, and nothing is written into the buffer.
  char buf[8] = "unset";
  EXPECT_EQ(gk_gemma3_attention_plan_cached(nullptr, &call.c, &call.t, nullptr, buf, sizeof(buf)),
            GK_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(gk_last_error_message(), "gemma3_attention: cache is null");
  EXPECT_STREQ(buf, "unset");
}

// --------------------------------------------------------------------------------------------------------------
struct AudioCall {
  gk_audio_qkv_config c{2, 773, 1024, 8, 128, 1e-6f, GK_PRECISION_TF32};
  gk_audio_qkv_tensors t{};
  AudioCall() {
    const int64_t B = c.batch, S = c.seq_len, N = c.num_heads * c.head_dim;
    t.hidden_states = make(1, GK_DTYPE_F32, {B, S, c.hidden});
    t.q_proj_weight = make(2, GK_DTYPE_F32, {N, c.hidden});
    t.k_proj_weight = make(3, GK_DTYPE_F32, {N, c.hidden});
    t.v_proj_weight = make(4, GK_DTYPE_F32, {N, c.hidden});
    t.q_norm_weight = make(5, GK_DTYPE_F32, {c.head_dim});
    t.k_norm_weight = make(6, GK_DTYPE_F32, {c.head_dim});
    t.query_states = make(7, GK_DTYPE_F32, {B, S, c.num_heads, c.head_dim});
    t.key_states = make(8, GK_DTYPE_F32, {B, S, c.num_heads, c.head_dim});
    t.value_states = make(9, GK_DTYPE_F32, {B, S, c.num_heads, c.head_dim});
  }
};

struct AudioCase {
  const char* what;
  std::function<void(AudioCall&)> mutate;
  gk_status code;
  const char* message_part;
};

void PrintTo(const AudioCase& c, std::ostream* os) { *os << c.what; }

class AudioRejects : public ::testing::TestWithParam<AudioCase> {};

TEST_P(AudioRejects, ThroughBothApis) {
  AudioCall call;
  GetParam().mutate(call);
  const gk::Status s = gk::audio_qkv_check(call.c, call.t);
  EXPECT_EQ(s.code(), GetParam().code) << s.message();
  EXPECT_NE(s.message().find(GetParam().message_part), std::string::npos) << s.message();
  EXPECT_EQ(gk_audio_qkv_check(&call.c, &call.t), GetParam().code);
  EXPECT_EQ(std::string(gk_last_error_message()), s.message());
}

const auto aset = [](auto fn) { return std::function<void(AudioCall&)>(fn); };

INSTANTIATE_TEST_SUITE_P(
    Table, AudioRejects,
    ::testing::Values(
        AudioCase{"batch0", aset([](AudioCall& x) { x.c.batch = 0; }), GK_STATUS_INVALID_ARGUMENT, "batch must be >= 1"},
        AudioCase{"seq0", aset([](AudioCall& x) { x.c.seq_len = 0; }), GK_STATUS_INVALID_ARGUMENT, "seq_len must be >= 1"},
        AudioCase{"rows_overflow", aset([](AudioCall& x) { x.c.batch = int64_t(1) << 40; x.c.seq_len = int64_t(1) << 40; }),
                  GK_STATUS_INVALID_ARGUMENT, "batch*seq_len"},
        AudioCase{"hidden", aset([](AudioCall& x) { x.c.hidden = 1000; }), GK_STATUS_INVALID_ARGUMENT, "hidden must be"},
        AudioCase{"heads0", aset([](AudioCall& x) { x.c.num_heads = 0; }), GK_STATUS_INVALID_ARGUMENT, "num_heads"},
        AudioCase{"head_dim256", aset([](AudioCall& x) { x.c.head_dim = 256; }), GK_STATUS_NOT_SUPPORTED, "head_dim 256"},
        AudioCase{"head_dim96", aset([](AudioCall& x) { x.c.head_dim = 96; }), GK_STATUS_INVALID_ARGUMENT, "head_dim 96"},
        AudioCase{"eps_neg", aset([](AudioCall& x) { x.c.eps = -1.f; }), GK_STATUS_INVALID_ARGUMENT, "eps must be"},
        AudioCase{"precision", aset([](AudioCall& x) { x.c.precision = static_cast<gk_precision>(5); }),
                  GK_STATUS_INVALID_ARGUMENT, "precision 5"},
        AudioCase{"hs_dtype", aset([](AudioCall& x) { x.t.hidden_states.dtype = GK_DTYPE_BF16; }),
                  GK_STATUS_INVALID_ARGUMENT, "hidden_states: dtype is bf16, expected f32"},
        AudioCase{"wk_null", aset([](AudioCall& x) { x.t.k_proj_weight.data = nullptr; }), GK_STATUS_INVALID_ARGUMENT,
                  "k_proj_weight: data pointer is null"},
        AudioCase{"wv_stride", aset([](AudioCall& x) { x.t.v_proj_weight.strides[1] = 2; }), GK_STATUS_INVALID_ARGUMENT,
                  "v_proj_weight: stride[1] is 2"},
        AudioCase{"qn_misaligned",
                  aset([](AudioCall& x) { x.t.q_norm_weight.data = static_cast<char*>(x.t.q_norm_weight.data) + 4; }),
                  GK_STATUS_INVALID_ARGUMENT, "q_norm_weight: data pointer"},
        AudioCase{"q_out_null", aset([](AudioCall& x) { x.t.query_states.data = nullptr; }), GK_STATUS_INVALID_ARGUMENT,
                  "query_states: data pointer is null"},
        AudioCase{"k_out_rank", aset([](AudioCall& x) { x.t.key_states.ndim = 3; }), GK_STATUS_INVALID_ARGUMENT,
                  "key_states: has 3 dimensions"},
        AudioCase{"v_out_dtype", aset([](AudioCall& x) { x.t.value_states.dtype = GK_DTYPE_BF16; }),
                  GK_STATUS_INVALID_ARGUMENT, "value_states: dtype is bf16"},
        AudioCase{"out_aliases_input", aset([](AudioCall& x) { x.t.value_states.data = x.t.hidden_states.data; }),
                  GK_STATUS_INVALID_ARGUMENT, "value_states overlaps input hidden_states"},
        AudioCase{"outs_alias", aset([](AudioCall& x) { x.t.key_states.data = x.t.query_states.data; }),
                  GK_STATUS_INVALID_ARGUMENT, "query_states overlaps input key_states"}));

TEST(AudioRejects, NullArgumentsAndWorkspace) {
  AudioCall call;
  EXPECT_EQ(gk_audio_qkv_check(nullptr, &call.t), GK_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(gk_last_error_message(), "audio_qkv: config is null");
  size_t tf32 = 0, exact = 0;
  ASSERT_EQ(gk_audio_qkv_workspace_size(&call.c, &tf32), GK_STATUS_SUCCESS);
  call.c.precision = GK_PRECISION_EXACT;
  ASSERT_EQ(gk_audio_qkv_workspace_size(&call.c, &exact), GK_STATUS_SUCCESS);
  EXPECT_GT(exact, 0u);  // both modes need GEMM workspace
  EXPECT_GT(tf32, 0u);
  EXPECT_EQ(gk_audio_qkv_forward(nullptr, &call.c, &call.t, fake_ptr(20), exact - 1, nullptr),
            GK_STATUS_WORKSPACE_TOO_SMALL);
  EXPECT_EQ(gk_audio_qkv_forward(nullptr, &call.c, &call.t, fake_ptr(20), exact, nullptr), GK_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(gk_last_error_message(), "audio_qkv: handle is null");
}

// The workspace the audio call needs in `precision` at `rows` tokens (batch 1).
size_t audio_workspace_bytes(gk_precision precision, int64_t rows) {
  AudioCall call;
  call.c.precision = precision;
  call.c.batch = 1;
  call.c.seq_len = rows;
  size_t bytes = 0;
  EXPECT_EQ(gk_audio_qkv_workspace_size(&call.c, &bytes), GK_STATUS_SUCCESS) << gk_last_error_message();
  return bytes;
}

// Exact mode reserves the split activations (8 B*S*hidden bytes) up to 256 MiB, and nothing for them beyond.
TEST(AudioWorkspace, ExactModeSplitScratchIsBounded) {
  const int64_t k = AudioCall().c.hidden;
  // Less the fp16 path's two-term activations and their exponents (its weights' part is the same for every count).
  const auto round256 = [](int64_t b) { return size_t((b + 255) / 256 * 256); };
  const auto need = [&](int64_t rows) {
    return audio_workspace_bytes(GK_PRECISION_EXACT, rows) - round256(4 * rows * k) - round256(4 * rows);
  };
  const size_t small = need(1024), large = need(2048);
  EXPECT_EQ(large - small, size_t(8 * 1024 * k));  // both multiples of the 256-byte carve alignment here
  const int64_t cap_rows = (int64_t(32) << 20) / k;
  EXPECT_EQ(need(cap_rows) - small, size_t(8 * (cap_rows - 1024) * k));
  EXPECT_LT(need(cap_rows + 1), small);  // past the bound only the GEMM workspace remains
}

// tf32 mode reserves v's weights rounded (4 H D hidden bytes) or, up to three weights' worth, the split kernel's
// rounded activations (4 B S hidden bytes), whichever is larger.
TEST(AudioWorkspace, Tf32ScratchIsVWeightsOrSmallActivations) {
  const gk_audio_qkv_config c = AudioCall().c;
  const int64_t k = c.hidden, n = c.num_heads * c.head_dim;
  // Less the fp16 path's activations and their exponents (its weights' part is the same for every row count).
  const auto round256 = [](int64_t b) { return size_t((b + 255) / 256 * 256); };
  const auto need = [&](int64_t rows) {
    return audio_workspace_bytes(GK_PRECISION_TF32, rows) - round256(2 * rows * k) - round256(4 * rows);
  };
  const size_t base = need(1);  // the GEMM workspace and v's weights
  EXPECT_EQ(need(n), base);
  EXPECT_EQ(need(3 * n) - base, size_t(4 * 2 * n * k));  // activations of 3 n rows against n weight rows
  EXPECT_EQ(need(3 * n + 1), base);
  EXPECT_EQ(need(8 * n), base);
}

TEST(PublicApi, TensorHelperAndStatusStrings) {
  const int64_t shape[3] = {2, 3, 4};
  const gk_tensor t = gk_tensor_contiguous(fake_ptr(1), GK_DTYPE_BF16, 3, shape);
  EXPECT_EQ(t.strides[0], 12);
  EXPECT_EQ(t.strides[1], 4);
  EXPECT_EQ(t.strides[2], 1);
  EXPECT_STREQ(gk_status_string(GK_STATUS_NOT_SUPPORTED), "not supported");
  EXPECT_STREQ(gk_status_string(static_cast<gk_status>(99)), "unknown status");
  EXPECT_EQ(gk_handle_create(nullptr), GK_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(gk_last_error_message(), "gk_handle_create: handle pointer is null");
}

}  // namespace

namespace {

// A call with a key/value cache: the layer's call plus caches of max_len 1024 and the lengths.
struct CachedCall : Gemma3Call {
  gk_kv_cache cache{};
  CachedCall() {
    c.seq_len = 1;  // a decode step
    refresh();
    cache.k_cache = make(12, GK_DTYPE_BF16, {c.batch, c.num_kv_heads, 1024, c.head_dim});
    cache.v_cache = make(13, GK_DTYPE_BF16, {c.batch, c.num_kv_heads, 1024, c.head_dim});
    cache.cache_seqlens = make(14, GK_DTYPE_I32, {c.batch});
    cache.max_cached = 1023;
  }
  gk_status check() { return gk_gemma3_attention_check_cached(&c, &t, &cache); }
};

TEST(Gemma3Cached, ValidCallsPass) {
  CachedCall call;
  EXPECT_EQ(call.check(), GK_STATUS_SUCCESS) << gk_last_error_message();
  call.c.sliding_window = 512;  // a local layer
  EXPECT_EQ(call.check(), GK_STATUS_SUCCESS) << gk_last_error_message();
  call.c.mask_mode = GK_MASK_NONE;
  call.c.sliding_window = 0;
  EXPECT_EQ(call.check(), GK_STATUS_SUCCESS) << gk_last_error_message();
}

TEST(Gemma3Cached, RejectsWhatItCannotTakeWithItsReason) {
  const auto expect = [](CachedCall call, gk_status code, const char* part) {
    EXPECT_EQ(call.check(), code) << part;
    EXPECT_NE(std::string(gk_last_error_message()).find(part), std::string::npos) << gk_last_error_message();
  };
  {
    CachedCall x;
    x.cache.max_cached = 1024;  // 1024 cached + 1 new in 1024 slots
    expect(x, GK_STATUS_INVALID_ARGUMENT, "max_cached 1024 + seq_len 1 do not fit");
  }
  {
    CachedCall x;
    x.cache.max_cached = -1;
    expect(x, GK_STATUS_INVALID_ARGUMENT, "max_cached -1");
  }
  {
    CachedCall x;
    x.c.mask_mode = GK_MASK_ADDITIVE;
    expect(x, GK_STATUS_NOT_SUPPORTED, "not additive");
  }
  {
    CachedCall x;
    x.cache.cache_seqlens.dtype = GK_DTYPE_F32;
    expect(x, GK_STATUS_INVALID_ARGUMENT, "cache_seqlens: dtype is f32, expected i32");
  }
  {
    CachedCall x;
    x.cache.v_cache = make(13, GK_DTYPE_BF16, {x.c.batch, x.c.num_kv_heads, 512, x.c.head_dim});
    expect(x, GK_STATUS_INVALID_ARGUMENT, "v_cache");
  }
  {
    CachedCall x;
    x.cache.k_cache = make(12, GK_DTYPE_BF16, {x.c.batch, x.c.num_kv_heads + 1, 1024, x.c.head_dim});
    expect(x, GK_STATUS_INVALID_ARGUMENT, "k_cache");
  }
  {
    CachedCall x;
    x.cache.v_cache = x.cache.k_cache;  // one allocation for both
    expect(x, GK_STATUS_INVALID_ARGUMENT, "overlap");
  }
  {
    CachedCall x;  // left-padding starts: int32 [B]
    x.cache.cache_starts = make(15, GK_DTYPE_F32, {x.c.batch});
    expect(x, GK_STATUS_INVALID_ARGUMENT, "cache_starts: dtype is f32, expected i32");
  }
  {
    CachedCall x;
    x.cache.cache_starts = make(15, GK_DTYPE_I32, {x.c.batch + 1});
    expect(x, GK_STATUS_INVALID_ARGUMENT, "cache_starts");
  }
  {
    CachedCall x;  // the output written over the starts it reads
    x.cache.cache_starts = make(11, GK_DTYPE_I32, {x.c.batch});
    expect(x, GK_STATUS_INVALID_ARGUMENT, "overlap");
  }
  {
    CachedCall x;
    x.cache.k_cache.ndim = 3;
    expect(x, GK_STATUS_INVALID_ARGUMENT, "k_cache must be [B, num_kv_heads, max_len, head_dim]");
  }
  EXPECT_EQ(gk_gemma3_attention_check_cached(nullptr, nullptr, nullptr), GK_STATUS_INVALID_ARGUMENT);
}

// The split calls: qkv with plain outputs or into a cache, attend over a cache.
struct SplitCall : CachedCall {
  gk_gemma3_qkv_tensors q{};
  gk_gemma3_attend_tensors a{};
  SplitCall() {
    const int64_t B = c.batch, S = c.seq_len, D = c.head_dim;
    q = {t.hidden_states, t.cos, t.sin, t.q_proj_weight, t.k_proj_weight, t.v_proj_weight, t.q_norm_weight,
         t.k_norm_weight, make(15, GK_DTYPE_BF16, {B, c.num_q_heads, S, D}),
         make(16, GK_DTYPE_BF16, {B, c.num_kv_heads, S, D}), make(17, GK_DTYPE_BF16, {B, c.num_kv_heads, S, D})};
    a = {q.q_out, t.o_proj_weight, t.out};
  }
};

TEST(Gemma3Split, ValidCallsPass) {
  SplitCall call;
  EXPECT_EQ(gk_gemma3_qkv_check(&call.c, &call.q, nullptr), GK_STATUS_SUCCESS) << gk_last_error_message();
  EXPECT_EQ(gk_gemma3_qkv_check(&call.c, &call.q, &call.cache), GK_STATUS_SUCCESS) << gk_last_error_message();
  call.q.k_out = call.q.v_out = gk_tensor{};  // not read with a cache
  EXPECT_EQ(gk_gemma3_qkv_check(&call.c, &call.q, &call.cache), GK_STATUS_SUCCESS) << gk_last_error_message();
  EXPECT_EQ(gk_gemma3_attend_check(&call.c, &call.a, &call.cache), GK_STATUS_SUCCESS) << gk_last_error_message();
  call.c.sliding_window = 512;
  EXPECT_EQ(gk_gemma3_attend_check(&call.c, &call.a, &call.cache), GK_STATUS_SUCCESS) << gk_last_error_message();
  size_t qkv_bytes = 0, attend_bytes = 0, layer_bytes = 0;
  ASSERT_EQ(gk_gemma3_qkv_workspace_size(&call.c, &qkv_bytes), GK_STATUS_SUCCESS);
  ASSERT_EQ(gk_gemma3_attend_workspace_size(&call.c, &attend_bytes), GK_STATUS_SUCCESS);
  ASSERT_EQ(gk_gemma3_attention_workspace_size(&call.c, &layer_bytes), GK_STATUS_SUCCESS);
  EXPECT_LT(qkv_bytes, layer_bytes);
  EXPECT_LT(attend_bytes, layer_bytes);
}

TEST(Gemma3Split, RejectsWhatItCannotTakeWithItsReason) {
  const auto expect = [](gk_status got, gk_status code, const char* part) {
    EXPECT_EQ(got, code) << part;
    EXPECT_NE(std::string(gk_last_error_message()).find(part), std::string::npos) << gk_last_error_message();
  };
  {
    SplitCall x;  // without a cache, k and v need their outputs
    x.q.k_out = gk_tensor{};
    expect(gk_gemma3_qkv_check(&x.c, &x.q, nullptr), GK_STATUS_INVALID_ARGUMENT, "gemma3_qkv: k_out");
  }
  {
    SplitCall x;  // q in the [B, S, H, D] order instead of [B, H, S, D]
    x.c.seq_len = 5;
    x.refresh();
    x.q.hidden_states = x.t.hidden_states;
    x.q.cos = x.t.cos;
    x.q.sin = x.t.sin;
    x.q.q_out = make(15, GK_DTYPE_BF16, {x.c.batch, 5, x.c.num_q_heads, x.c.head_dim});
    expect(gk_gemma3_qkv_check(&x.c, &x.q, nullptr), GK_STATUS_INVALID_ARGUMENT, "gemma3_qkv: q_out");
  }
  {
    SplitCall x;
    x.q.v_out = x.q.k_out;
    expect(gk_gemma3_qkv_check(&x.c, &x.q, nullptr), GK_STATUS_INVALID_ARGUMENT, "overlap");
  }
  {
    SplitCall x;  // the new k written over the activations it is computed from
    x.cache.k_cache = make(1, GK_DTYPE_BF16, {x.c.batch, x.c.num_kv_heads, 1024, x.c.head_dim});
    expect(gk_gemma3_qkv_check(&x.c, &x.q, &x.cache), GK_STATUS_INVALID_ARGUMENT, "overlap");
  }
  {
    SplitCall x;
    x.c.head_dim = 64;
    expect(gk_gemma3_qkv_check(&x.c, &x.q, nullptr), GK_STATUS_NOT_SUPPORTED, "gemma3_qkv: head_dim 64");
  }
  {
    SplitCall x;
    x.c.mask_mode = GK_MASK_ADDITIVE;
    expect(gk_gemma3_attend_check(&x.c, &x.a, &x.cache), GK_STATUS_NOT_SUPPORTED, "gemma3_attend");
  }
  {
    SplitCall x;
    x.cache.max_cached = 1024;
    expect(gk_gemma3_attend_check(&x.c, &x.a, &x.cache), GK_STATUS_INVALID_ARGUMENT, "do not fit");
  }
  {
    SplitCall x;  // the output over the cache it reads
    x.a.out = make(12, GK_DTYPE_BF16, {x.c.batch, x.c.seq_len, x.c.hidden});
    expect(gk_gemma3_attend_check(&x.c, &x.a, &x.cache), GK_STATUS_INVALID_ARGUMENT, "overlap");
  }
  {
    SplitCall x;
    x.a.query = make(15, GK_DTYPE_F16, {x.c.batch, x.c.num_q_heads, x.c.seq_len, x.c.head_dim});
    expect(gk_gemma3_attend_check(&x.c, &x.a, &x.cache), GK_STATUS_INVALID_ARGUMENT, "query: dtype");
  }
  SplitCall x;
  expect(gk_gemma3_attend_check(&x.c, &x.a, nullptr), GK_STATUS_INVALID_ARGUMENT, "cache is null");
  expect(gk_gemma3_qkv_forward(nullptr, &x.c, &x.q, nullptr, fake_ptr(20), 1 << 30, nullptr),
         GK_STATUS_INVALID_ARGUMENT, "gemma3_qkv");
  expect(gk_gemma3_attend_forward(nullptr, &x.c, &x.a, &x.cache, fake_ptr(20), 1 << 30, nullptr),
         GK_STATUS_INVALID_ARGUMENT, "gemma3_attend");
}

}  // namespace

namespace {

// Prepared weights (gk_audio_qkv_prepare): the buffer's size, and what is rejected before any launch, without a
// GPU (every case fails before the handle is needed).
TEST(AudioPrepared, SizeIsTheThreeWeightsInFp16AndTheirExponents) {
  const gk_audio_qkv_config c = AudioCall().c;
  const size_t rows = size_t(3 * c.num_heads * c.head_dim);
  const auto round256 = [](size_t b) { return (b + 255) / 256 * 256; };
  size_t bytes = 0;
  ASSERT_EQ(gk_audio_qkv_prepared_size(&c, &bytes), GK_STATUS_SUCCESS) << gk_last_error_message();
  EXPECT_EQ(bytes, round256(rows * size_t(c.hidden) * 2) + round256(rows * 4));
  gk_audio_qkv_config exact = c;
  exact.precision = GK_PRECISION_EXACT;
  EXPECT_EQ(gk_audio_qkv_prepared_size(&exact, &bytes), GK_STATUS_NOT_SUPPORTED);
  EXPECT_NE(std::string(gk_last_error_message()).find("tf32 mode"), std::string::npos) << gk_last_error_message();
}

TEST(AudioPrepared, PrepareRejectsBadBuffersAndWeights) {
  AudioCall call;
  size_t bytes = 0;
  ASSERT_EQ(gk_audio_qkv_prepared_size(&call.c, &bytes), GK_STATUS_SUCCESS);
  gk_audio_qkv_prepared out{};
  void* data = fake_ptr(30);
  EXPECT_EQ(gk_audio_qkv_prepare(nullptr, &call.c, &call.t, data, bytes, nullptr, nullptr),
            GK_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(gk_audio_qkv_prepare(nullptr, &call.c, &call.t, data, bytes - 1, nullptr, &out),
            GK_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error_message()).find("gk_audio_qkv_prepared_size"), std::string::npos);
  EXPECT_EQ(gk_audio_qkv_prepare(nullptr, &call.c, &call.t, static_cast<char*>(data) + 16, bytes, nullptr, &out),
            GK_STATUS_INVALID_ARGUMENT);
  call.t.k_proj_weight = make(3, GK_DTYPE_F32, {call.c.num_heads * call.c.head_dim, call.c.hidden + 64});
  EXPECT_EQ(gk_audio_qkv_prepare(nullptr, &call.c, &call.t, data, bytes, nullptr, &out), GK_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error_message()).find("k_proj_weight"), std::string::npos) << gk_last_error_message();
  EXPECT_EQ(out.data, nullptr);  // nothing filled
}

TEST(AudioPrepared, ForwardRejectsAnotherShapeAndOverlaps) {
  AudioCall call;
  size_t bytes = 0;
  ASSERT_EQ(gk_audio_qkv_prepared_size(&call.c, &bytes), GK_STATUS_SUCCESS);
  const gk_audio_qkv_prepared prepared{call.c.hidden, call.c.num_heads, call.c.head_dim, fake_ptr(30), bytes};
  void* ws = fake_ptr(20);
  gk_audio_qkv_prepared other = prepared;
  other.num_heads = 4;
  EXPECT_EQ(gk_audio_qkv_forward_prepared(nullptr, &call.c, &call.t, &other, ws, size_t(1) << 34, nullptr),
            GK_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error_message()).find("prepared for"), std::string::npos) << gk_last_error_message();
  other = prepared;
  other.bytes = bytes - 256;
  EXPECT_EQ(gk_audio_qkv_forward_prepared(nullptr, &call.c, &call.t, &other, ws, size_t(1) << 34, nullptr),
            GK_STATUS_INVALID_ARGUMENT);
  // An output inside the prepared buffer.
  call.t.value_states.data = static_cast<char*>(prepared.data) + 1024;
  EXPECT_EQ(gk_audio_qkv_forward_prepared(nullptr, &call.c, &call.t, &prepared, ws, size_t(1) << 34, nullptr),
            GK_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error_message()).find("prepared weights"), std::string::npos)
      << gk_last_error_message();
  gk_audio_qkv_config exact = call.c;
  exact.precision = GK_PRECISION_EXACT;
  EXPECT_EQ(gk_audio_qkv_forward_prepared(nullptr, &exact, &call.t, &prepared, ws, size_t(1) << 34, nullptr),
            GK_STATUS_NOT_SUPPORTED);
}

}  // namespace
