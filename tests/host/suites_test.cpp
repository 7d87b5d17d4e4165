#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "suites.hpp"

namespace {

using gk_testkit::builtin_suite;
using gk_testkit::parse_suite;

TEST(Suites, BuiltInGemma3SuiteMatchesTheSpec) {
  const auto& s = builtin_suite("047");
  EXPECT_EQ(s.op, "gemma3_attention");
  ASSERT_EQ(s.workloads.size(), 16u);
  EXPECT_EQ(s.constant("hidden"), 3072);
  EXPECT_EQ(s.constant("num_q_heads"), 24);
  EXPECT_EQ(s.constant("num_kv_heads"), 8);
  EXPECT_EQ(s.constant("softcap"), 50.0);
  EXPECT_DOUBLE_EQ(s.required_matched_ratio, 0.99);
  EXPECT_EQ(s.workloads.front().batch, 1);
  EXPECT_EQ(s.workloads.front().seq_len, 128);
  EXPECT_DOUBLE_EQ(s.workloads.front().atol, 0.033);
  EXPECT_EQ(s.workloads.back().seq_len, 8192);
  EXPECT_DOUBLE_EQ(s.workloads.back().atol, 0.066);
  const auto c = gk_testkit::gemma3_config(s, s.workloads[7]);  // (2, 293)
  EXPECT_EQ(c.batch, 2);
  EXPECT_EQ(c.seq_len, 293);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.mask_mode, GK_MASK_CAUSAL);
  EXPECT_FLOAT_EQ(c.norm_weight_offset, 1.f);
}

TEST(Suites, BuiltInAudioSuiteMatchesTheSpec) {
  const auto& s = builtin_suite("054");
  EXPECT_EQ(s.op, "audio_qkv");
  ASSERT_EQ(s.workloads.size(), 16u);
  EXPECT_EQ(s.workloads[3].batch, 64);
  EXPECT_DOUBLE_EQ(s.workloads[3].rtol, 1e-5);
  const auto c = gk_testkit::audio_config(s, s.workloads[12], GK_PRECISION_EXACT);  // (8, 773)
  EXPECT_EQ(c.seq_len, 773);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.precision, GK_PRECISION_EXACT);
}

TEST(Suites, BuiltInModelSuiteGivesEachWorkloadItsModel) {
  const auto& s = builtin_suite("gemma3");
  EXPECT_EQ(s.op, "gemma3_attention");
  ASSERT_EQ(s.workloads.size(), 32u);  // 4 models x {global, local} x 4 shapes
  int local = 0;
  for (const auto& w : s.workloads) {
    const auto c = gk_testkit::gemma3_config(s, w);
    EXPECT_EQ(c.softcap, 0.f) << w.label;  // the released models have none
    EXPECT_EQ(c.mask_mode, GK_MASK_CAUSAL);
    EXPECT_EQ(w.label.find("local") != std::string::npos, c.sliding_window > 0) << w.label;
    local += c.sliding_window > 0;
    if (w.label == "27B local" && w.seq_len == 8192) {
      EXPECT_EQ(c.hidden, 5376);
      EXPECT_EQ(c.num_q_heads, 32);
      EXPECT_EQ(c.num_kv_heads, 16);
      EXPECT_EQ(c.head_dim, 128);
      EXPECT_EQ(c.sliding_window, 1024);
      EXPECT_FLOAT_EQ(c.query_scale, 1.f / std::sqrt(168.f));
    }
    if (w.label == "1B local") {
      EXPECT_EQ(c.head_dim, 256);
      EXPECT_EQ(c.sliding_window, 512);
      EXPECT_FLOAT_EQ(c.query_scale, 1.f / 16.f);
    }
  }
  EXPECT_EQ(local, 16);
}

TEST(Suites, BuiltInDecodeSuiteHasOneNewTokenAfterEachCache) {
  const auto& s = builtin_suite("decode");
  ASSERT_EQ(s.workloads.size(), 12u);  // B 1, 8, 32, 64 x cached 1024, 8192, 32768
  for (const auto& w : s.workloads) {
    EXPECT_EQ(w.seq_len, 1);
    const int64_t cached = gk_testkit::gemma3_cached(s, w);
    EXPECT_TRUE(cached == 1024 || cached == 8192 || cached == 32768) << cached;
    const auto c = gk_testkit::gemma3_config(s, w);
    EXPECT_EQ(c.hidden, 3072);  // 047's layer
    EXPECT_EQ(c.num_q_heads, 24);
  }
  EXPECT_EQ(gk_testkit::gemma3_cached(builtin_suite("047"), builtin_suite("047").workloads[0]), 0);
}

TEST(Suites, UnknownSuiteNamesTheKnownOnes) {
  try {
    builtin_suite("999");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("known: 047, 054"), std::string::npos) << e.what();
  }
}

TEST(Suites, ParseErrorsAreSpecific) {
  const auto error_of = [](const std::string& text) {
    try {
      parse_suite(text);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"operator":"audio_qkv"})").find("missing key 'id'"), std::string::npos);
  EXPECT_NE(error_of(R"({"id":"x","operator":"conv"})").find("unknown operator 'conv'"), std::string::npos);
  const std::string head = R"({"id":"x","operator":"audio_qkv","constants":{},"required_matched_ratio":0.99,)";
  EXPECT_NE(error_of(head + R"("workloads":[]})").find("non-empty array"), std::string::npos);
  EXPECT_NE(error_of(head + R"("workloads":[{"batch":1,"seq_len":0,"atol":0,"rtol":0}]})").find("workload 0"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"("workloads":[{"batch":"one","seq_len":1,"atol":0,"rtol":0}]})").find("wrong value type"),
            std::string::npos);
  const auto ok = parse_suite(head + R"("workloads":[{"batch":3,"seq_len":5,"atol":0.1,"rtol":0.2}]})");
  EXPECT_EQ(ok.workloads.at(0).seq_len, 5);
  EXPECT_THROW(ok.constant("hidden"), std::runtime_error);
  // A workload's own configuration overrides the suite's constants; other keys fall back.
  const auto own = parse_suite(R"({"id":"x","operator":"gemma3_attention","constants":{"hidden":64,"eps":1e-6},)"
                               R"("required_matched_ratio":0.99,"workloads":[{"label":"wide","batch":1,"seq_len":2,)"
                               R"("atol":0,"rtol":0,"config":{"hidden":128,"window":4}}]})");
  EXPECT_EQ(own.workloads.at(0).label, "wide");
  EXPECT_EQ(own.value(own.workloads.at(0), "hidden"), 128);
  EXPECT_EQ(own.value(own.workloads.at(0), "eps"), 1e-6);
  EXPECT_EQ(own.value(own.workloads.at(0), "query_scale", 0.0), 0.0);
  EXPECT_NE(error_of(head + R"("workloads":[{"batch":1,"seq_len":1,"atol":0,"rtol":0,"config":3}]})").find("'config' must be an object"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"("workloads":[{"batch":1,"seq_len":1,"atol":0,"rtol":0,"config":{"window":4}}]})")
                .find("unknown config key 'window'"),  // an audio suite has no window
            std::string::npos);
}

}  // namespace
