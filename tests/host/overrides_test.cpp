// The override parser (src/common/overrides.cpp): one syntax, unknown keys and values rejected with a message, and
// the printed form reads back to the same value.
#include <gtest/gtest.h>

#include <string>

#include "common/overrides.hpp"

namespace {

using gk::detail::format_overrides;
using gk::detail::kAuto;
using gk::detail::Overrides;
using gk::detail::parse_overrides;

TEST(Overrides, EmptyOrNullMeansNone) {
  Overrides o;
  o.qkv = 1;
  ASSERT_TRUE(parse_overrides(nullptr, &o).ok());
  EXPECT_EQ(o.qkv, kAuto);
  ASSERT_TRUE(parse_overrides("  ,, ", &o).ok());
  EXPECT_EQ(format_overrides(o), "");
}

TEST(Overrides, ParsesEveryKeyAndPrintsItBack) {
  const char* spec =
      "attention.kernel=sm80,attention.tail=separate attention.store=direct;attention.softmax=fixed,qkv=splitk,"
      "kv_gemm=separate,o_prefetch=projection,audio.tf32=persistent,audio.stream_k=off,audio.v_round=pass,"
      "audio.v_weights=registers,audio.activations=smem,audio.exact=cublas";
  Overrides o;
  ASSERT_TRUE(parse_overrides(spec, &o).ok());
  EXPECT_EQ(o.attention_kernel, 1);
  EXPECT_EQ(o.attention_tail, 1);
  EXPECT_EQ(o.attention_store, 1);
  EXPECT_EQ(o.attention_softmax, 1);
  EXPECT_EQ(o.qkv, 0);
  EXPECT_EQ(o.kv_gemm, 1);
  EXPECT_EQ(o.o_prefetch, 2);
  EXPECT_EQ(o.audio_tf32, 1);
  EXPECT_EQ(o.audio_stream_k, 1);
  EXPECT_EQ(o.audio_v_round, 1);
  EXPECT_EQ(o.audio_v_weights, 1);
  EXPECT_EQ(o.audio_activations, 1);
  EXPECT_EQ(o.audio_exact, 1);
  Overrides back;
  ASSERT_TRUE(parse_overrides(format_overrides(o).c_str(), &back).ok());
  EXPECT_EQ(format_overrides(back), format_overrides(o));
}

TEST(Overrides, AutoClearsAKey) {
  Overrides o;
  ASSERT_TRUE(parse_overrides("qkv=cublas,qkv=auto", &o).ok());
  EXPECT_EQ(o.qkv, kAuto);
}

TEST(Overrides, UnknownKeysAndValuesFailAndChangeNothing) {
  Overrides o;
  ASSERT_TRUE(parse_overrides("qkv=cublas", &o).ok());
  gk::Status s = parse_overrides("attention.kernal=sm80", &o);
  EXPECT_EQ(s.code(), GK_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("unknown key 'attention.kernal'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("attention.kernel"), std::string::npos) << s.message();  // lists the keys
  s = parse_overrides("attention.kernel=wgmma", &o);
  EXPECT_EQ(s.code(), GK_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("sm90|sm80|auto"), std::string::npos) << s.message();
  s = parse_overrides("qkv", &o);
  EXPECT_EQ(s.code(), GK_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(o.qkv, 1);  // unchanged by the failed calls
}

}  // namespace
