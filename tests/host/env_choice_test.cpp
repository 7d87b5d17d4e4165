// The library's developer overrides (GK_ATTENTION_KERNEL, GK_PROJ_PATH, GK_AUDIO_TF32_PATH, GK_AUDIO_EXACT_PATH): a
// value that is none of the choices must become an error, never a silent fall-back to the automatic path.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/env_choice.hpp"

namespace {

constexpr const char* kVar = "GK_TEST_ENV_CHOICE";

int choice() { return gk::detail::env_choice(kVar, {"fused", "cublas"}); }

TEST(EnvChoice, UnsetEmptyKnownAndMisspelled) {
  unsetenv(kVar);
  EXPECT_EQ(choice(), gk::detail::kEnvUnset);
  setenv(kVar, "", 1);
  EXPECT_EQ(choice(), gk::detail::kEnvUnset);
  setenv(kVar, "fused", 1);
  EXPECT_EQ(choice(), 0);
  setenv(kVar, "cublas", 1);
  EXPECT_EQ(choice(), 1);
  setenv(kVar, "cuBLAS", 1);
  EXPECT_EQ(choice(), gk::detail::kEnvInvalid);
  unsetenv(kVar);
}

TEST(EnvChoice, ErrorNamesTheVariableAndTheChoices) {
  const gk::Status s = gk::detail::env_error("gemma3_attention", "GK_PROJ_PATH", "fused|cublas");
  EXPECT_EQ(s.code(), GK_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(s.message()).find("gemma3_attention: GK_PROJ_PATH is set to a value other than fused|cublas"),
            std::string::npos)
      << s.message();
}

}  // namespace
