// One version number (include/gk/gk.h) for CMake, the C API and the library, and the ABI description a binding
// checks its copies of the structs against.
#include <gtest/gtest.h>

#include <string>

#include "gk/gk.h"

namespace {

TEST(Version, HeaderLibraryAndCMakeAgree) {
  EXPECT_EQ(std::string(gk_version()), GK_VERSION_STRING);
  EXPECT_EQ(std::string(GK_PROJECT_VERSION), GK_VERSION_STRING);  // CMake's project() version
  EXPECT_EQ(std::to_string(GK_VERSION_MAJOR) + "." + std::to_string(GK_VERSION_MINOR) + "." +
                std::to_string(GK_VERSION_PATCH),
            GK_VERSION_STRING);
}

TEST(Version, AbiDescribesTheStructs) {
  EXPECT_EQ(gk_abi_version(), GK_ABI_VERSION);
  EXPECT_EQ(gk_abi_struct_size(GK_ABI_TENSOR), sizeof(gk_tensor));
  EXPECT_EQ(gk_abi_struct_size(GK_ABI_GEMMA3_CONFIG), sizeof(gk_gemma3_attention_config));
  EXPECT_EQ(gk_abi_struct_size(GK_ABI_GEMMA3_TENSORS), sizeof(gk_gemma3_attention_tensors));
  EXPECT_EQ(gk_abi_struct_size(GK_ABI_AUDIO_CONFIG), sizeof(gk_audio_qkv_config));
  EXPECT_EQ(gk_abi_struct_size(GK_ABI_AUDIO_TENSORS), sizeof(gk_audio_qkv_tensors));
  EXPECT_EQ(gk_abi_struct_size(GK_ABI_KV_CACHE), sizeof(gk_kv_cache));
  EXPECT_EQ(gk_abi_struct_size(-1), 0u);
  EXPECT_EQ(gk_abi_struct_size(GK_ABI_GEMMA3_QKV_TENSORS), sizeof(gk_gemma3_qkv_tensors));
  EXPECT_EQ(gk_abi_struct_size(GK_ABI_GEMMA3_ATTEND_TENSORS), sizeof(gk_gemma3_attend_tensors));
  EXPECT_EQ(gk_abi_struct_size(GK_ABI_AUDIO_PREPARED), sizeof(gk_audio_qkv_prepared));
  EXPECT_EQ(gk_abi_struct_size(9), 0u);
}

}  // namespace
