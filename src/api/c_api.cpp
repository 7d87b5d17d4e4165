// The C ABI: each entry point forwards to the C++ API and keeps the failure message per thread. No exception
// crosses this boundary.
#include <algorithm>
#include <exception>
#include <initializer_list>
#include <utility>
#include <string>

#include "gk/gk.h"
#include "gk/gk.hpp"
#include "common/status_util.hpp"
#include "api/handle.hpp"

namespace gk::detail {
Status create_handle(gk_handle_t* out);
}

namespace {

thread_local std::string g_last_error;

gk_status finish(const gk::Status& s) {
  g_last_error = s.ok() ? std::string() : s.message();
  return s.code();
}

template <typename F>
gk_status guarded(const char* op, F&& f) {
  try {
    return finish(f());
  } catch (const std::exception& e) {
    return finish(gk::Status(GK_STATUS_INTERNAL_ERROR, std::string(op) + ": " + e.what()));
  } catch (...) {
    return finish(gk::Status(GK_STATUS_INTERNAL_ERROR, std::string(op) + ": unknown exception"));
  }
}

// Names the first null pointer argument, or returns Ok.
gk::Status null_args(const char* op, std::initializer_list<std::pair<const char*, const void*>> args) {
  for (const auto& [name, ptr] : args) {
    if (ptr == nullptr) return gk::Status(GK_STATUS_INVALID_ARGUMENT, std::string(op) + ": " + name + " is null");
  }
  return gk::Status::Ok();
}

// A string into a caller's buffer of `len` bytes, NUL-terminated, or an error naming the length it needs.
gk::Status copy_out(const char* op, const std::string& s, char* buf, size_t len) {
  if (s.size() + 1 > len) {
    return gk::Status(GK_STATUS_INVALID_ARGUMENT, std::string(op) + ": the plan needs a buffer of " +
                                                       std::to_string(s.size() + 1) + " bytes, got " +
                                                       std::to_string(len));
  }
  std::copy(s.begin(), s.end(), buf);
  buf[s.size()] = '\0';
  return gk::Status::Ok();
}

// An operator's plan query: the C++ call's string copied out.
template <class Config, class Tensors, class Plan>
gk_status plan_entry(const char* op, Plan plan, gk_handle_t handle, const Config* config, const Tensors* tensors,
                     char* buf, size_t len) {
  return guarded(op, [&] {
    GK_RETURN_IF_ERROR(null_args(op, {{"config", config}, {"tensors", tensors}, {"buf", buf}}));
    std::string s;
    GK_RETURN_IF_ERROR(plan(handle, *config, *tensors, &s));
    return copy_out(op, s, buf, len);
  });
}

}  // namespace

extern "C" {

gk_tensor gk_tensor_contiguous(void* data, gk_dtype dtype, int32_t ndim, const int64_t* shape) {
  gk_tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = ndim;
  const int n = ndim < GK_MAX_DIMS ? ndim : GK_MAX_DIMS;
  int64_t stride = 1;
  for (int i = n - 1; i >= 0; --i) {
    t.shape[i] = shape ? shape[i] : 0;
    t.strides[i] = stride;
    stride *= t.shape[i];
  }
  return t;
}

gk_status gk_handle_create(gk_handle_t* handle) {
  return guarded("gk_handle_create", [&] { return gk::detail::create_handle(handle); });
}

gk_status gk_handle_destroy(gk_handle_t handle) {
  delete handle;
  return finish(gk::Status::Ok());
}

gk_status gk_handle_set_overrides(gk_handle_t handle, const char* spec) {
  return guarded("gk_handle_set_overrides", [&] { return gk::set_overrides(handle, spec); });
}

const char* gk_last_error_message(void) { return g_last_error.c_str(); }

const char* gk_version(void) { return GK_VERSION_STRING; }

int32_t gk_abi_version(void) { return GK_ABI_VERSION; }

size_t gk_abi_struct_size(int32_t which) {
  switch (which) {
    case GK_ABI_TENSOR:
      return sizeof(gk_tensor);
    case GK_ABI_GEMMA3_CONFIG:
      return sizeof(gk_gemma3_attention_config);
    case GK_ABI_GEMMA3_TENSORS:
      return sizeof(gk_gemma3_attention_tensors);
    case GK_ABI_AUDIO_CONFIG:
      return sizeof(gk_audio_qkv_config);
    case GK_ABI_AUDIO_TENSORS:
      return sizeof(gk_audio_qkv_tensors);
    case GK_ABI_KV_CACHE:
      return sizeof(gk_kv_cache);
    case GK_ABI_GEMMA3_QKV_TENSORS:
      return sizeof(gk_gemma3_qkv_tensors);
    case GK_ABI_GEMMA3_ATTEND_TENSORS:
      return sizeof(gk_gemma3_attend_tensors);
    case GK_ABI_AUDIO_PREPARED:
      return sizeof(gk_audio_qkv_prepared);
    default:
      return 0;
  }
}

const char* gk_status_string(gk_status status) {
  switch (status) {
    case GK_STATUS_SUCCESS:
      return "success";
    case GK_STATUS_INVALID_ARGUMENT:
      return "invalid argument";
    case GK_STATUS_NOT_SUPPORTED:
      return "not supported";
    case GK_STATUS_WORKSPACE_TOO_SMALL:
      return "workspace too small";
    case GK_STATUS_CUDA_ERROR:
      return "CUDA error";
    case GK_STATUS_CUBLAS_ERROR:
      return "cuBLAS error";
    case GK_STATUS_INTERNAL_ERROR:
      return "internal error";
  }
  return "unknown status";
}

gk_status gk_gemma3_attention_check(const gk_gemma3_attention_config* config,
                                    const gk_gemma3_attention_tensors* tensors) {
  return guarded("gemma3_attention", [&] {
    GK_RETURN_IF_ERROR(null_args("gemma3_attention", {{"config", config}, {"tensors", tensors}}));
    return gk::gemma3_attention_check(*config, *tensors);
  });
}

gk_status gk_gemma3_attention_workspace_size(const gk_gemma3_attention_config* config, size_t* bytes) {
  return guarded("gemma3_attention", [&] {
    GK_RETURN_IF_ERROR(null_args("gemma3_attention", {{"config", config}, {"bytes", bytes}}));
    return gk::gemma3_attention_workspace_size(*config, bytes);
  });
}

gk_status gk_gemma3_attention_check_cached(const gk_gemma3_attention_config* config,
                                          const gk_gemma3_attention_tensors* tensors, const gk_kv_cache* cache) {
  return guarded("gemma3_attention", [&] {
    GK_RETURN_IF_ERROR(null_args("gemma3_attention", {{"config", config}, {"tensors", tensors}, {"cache", cache}}));
    return gk::gemma3_attention_check_cached(*config, *tensors, *cache);
  });
}

gk_status gk_gemma3_attention_forward_cached(gk_handle_t handle, const gk_gemma3_attention_config* config,
                                            const gk_gemma3_attention_tensors* tensors, const gk_kv_cache* cache,
                                            void* workspace, size_t workspace_bytes, gk_stream_t stream) {
  return guarded("gemma3_attention", [&] {
    GK_RETURN_IF_ERROR(null_args("gemma3_attention", {{"config", config}, {"tensors", tensors}, {"cache", cache}}));
    return gk::gemma3_attention_forward_cached(handle, *config, *tensors, *cache, workspace, workspace_bytes, stream);
  });
}

gk_status gk_gemma3_attention_forward(gk_handle_t handle, const gk_gemma3_attention_config* config,
                                      const gk_gemma3_attention_tensors* tensors, void* workspace,
                                      size_t workspace_bytes, gk_stream_t stream) {
  return guarded("gemma3_attention", [&] {
    GK_RETURN_IF_ERROR(null_args("gemma3_attention", {{"config", config}, {"tensors", tensors}}));
    return gk::gemma3_attention_forward(handle, *config, *tensors, workspace, workspace_bytes, stream);
  });
}

gk_status gk_gemma3_qkv_check(const gk_gemma3_attention_config* config, const gk_gemma3_qkv_tensors* tensors,
                              const gk_kv_cache* cache) {
  return guarded("gemma3_qkv", [&] {
    GK_RETURN_IF_ERROR(null_args("gemma3_qkv", {{"config", config}, {"tensors", tensors}}));
    return gk::gemma3_qkv_check(*config, *tensors, cache);
  });
}

gk_status gk_gemma3_qkv_workspace_size(const gk_gemma3_attention_config* config, size_t* bytes) {
  return guarded("gemma3_qkv", [&] {
    GK_RETURN_IF_ERROR(null_args("gemma3_qkv", {{"config", config}, {"bytes", bytes}}));
    return gk::gemma3_qkv_workspace_size(*config, bytes);
  });
}

gk_status gk_gemma3_qkv_forward(gk_handle_t handle, const gk_gemma3_attention_config* config,
                                const gk_gemma3_qkv_tensors* tensors, const gk_kv_cache* cache, void* workspace,
                                size_t workspace_bytes, gk_stream_t stream) {
  return guarded("gemma3_qkv", [&] {
    GK_RETURN_IF_ERROR(null_args("gemma3_qkv", {{"config", config}, {"tensors", tensors}}));
    return gk::gemma3_qkv_forward(handle, *config, *tensors, cache, workspace, workspace_bytes, stream);
  });
}

gk_status gk_gemma3_attend_check(const gk_gemma3_attention_config* config, const gk_gemma3_attend_tensors* tensors,
                                 const gk_kv_cache* cache) {
  return guarded("gemma3_attend", [&] {
    GK_RETURN_IF_ERROR(null_args("gemma3_attend", {{"config", config}, {"tensors", tensors}, {"cache", cache}}));
    return gk::gemma3_attend_check(*config, *tensors, *cache);
  });
}

gk_status gk_gemma3_attend_workspace_size(const gk_gemma3_attention_config* config, size_t* bytes) {
  return guarded("gemma3_attend", [&] {
    GK_RETURN_IF_ERROR(null_args("gemma3_attend", {{"config", config}, {"bytes", bytes}}));
    return gk::gemma3_attend_workspace_size(*config, bytes);
  });
}

gk_status gk_gemma3_attend_forward(gk_handle_t handle, const gk_gemma3_attention_config* config,
                                   const gk_gemma3_attend_tensors* tensors, const gk_kv_cache* cache, void* workspace,
                                   size_t workspace_bytes, gk_stream_t stream) {
  return guarded("gemma3_attend", [&] {
    GK_RETURN_IF_ERROR(null_args("gemma3_attend", {{"config", config}, {"tensors", tensors}, {"cache", cache}}));
    return gk::gemma3_attend_forward(handle, *config, *tensors, *cache, workspace, workspace_bytes, stream);
  });
}

gk_status gk_gemma3_attention_plan(gk_handle_t handle, const gk_gemma3_attention_config* config,
                                   const gk_gemma3_attention_tensors* tensors, char* buf, size_t len) {
  return plan_entry("gemma3_attention", gk::gemma3_attention_plan, handle, config, tensors, buf, len);
}

gk_status gk_gemma3_attention_plan_cached(gk_handle_t handle, const gk_gemma3_attention_config* config,
                                          const gk_gemma3_attention_tensors* tensors, const gk_kv_cache* cache,
                                          char* buf, size_t len) {
  const auto plan = [cache](gk_handle_t h, const gk::Gemma3AttentionConfig& c, const gk::Gemma3AttentionTensors& t,
                            std::string* s) {
    GK_RETURN_IF_ERROR(null_args("gemma3_attention", {{"cache", cache}}));
    return gk::gemma3_attention_plan_cached(h, c, t, *cache, s);
  };
  return plan_entry("gemma3_attention", plan, handle, config, tensors, buf, len);
}

gk_status gk_audio_qkv_check(const gk_audio_qkv_config* config, const gk_audio_qkv_tensors* tensors) {
  return guarded("audio_qkv", [&] {
    GK_RETURN_IF_ERROR(null_args("audio_qkv", {{"config", config}, {"tensors", tensors}}));
    return gk::audio_qkv_check(*config, *tensors);
  });
}

gk_status gk_audio_qkv_workspace_size(const gk_audio_qkv_config* config, size_t* bytes) {
  return guarded("audio_qkv", [&] {
    GK_RETURN_IF_ERROR(null_args("audio_qkv", {{"config", config}, {"bytes", bytes}}));
    return gk::audio_qkv_workspace_size(*config, bytes);
  });
}

gk_status gk_audio_qkv_forward(gk_handle_t handle, const gk_audio_qkv_config* config,
                               const gk_audio_qkv_tensors* tensors, void* workspace, size_t workspace_bytes,
                               gk_stream_t stream) {
  return guarded("audio_qkv", [&] {
    GK_RETURN_IF_ERROR(null_args("audio_qkv", {{"config", config}, {"tensors", tensors}}));
    return gk::audio_qkv_forward(handle, *config, *tensors, workspace, workspace_bytes, stream);
  });
}

gk_status gk_audio_qkv_prepared_size(const gk_audio_qkv_config* config, size_t* bytes) {
  return guarded("audio_qkv", [&] {
    GK_RETURN_IF_ERROR(null_args("audio_qkv", {{"config", config}, {"bytes", bytes}}));
    return gk::audio_qkv_prepared_size(*config, bytes);
  });
}

gk_status gk_audio_qkv_prepare(gk_handle_t handle, const gk_audio_qkv_config* config,
                               const gk_audio_qkv_tensors* tensors, void* data, size_t bytes, gk_stream_t stream,
                               gk_audio_qkv_prepared* prepared) {
  return guarded("audio_qkv", [&] {
    GK_RETURN_IF_ERROR(
        null_args("audio_qkv", {{"config", config}, {"tensors", tensors}, {"prepared", prepared}}));
    return gk::audio_qkv_prepare(handle, *config, *tensors, data, bytes, stream, prepared);
  });
}

gk_status gk_audio_qkv_forward_prepared(gk_handle_t handle, const gk_audio_qkv_config* config,
                                        const gk_audio_qkv_tensors* tensors, const gk_audio_qkv_prepared* prepared,
                                        void* workspace, size_t workspace_bytes, gk_stream_t stream) {
  return guarded("audio_qkv", [&] {
    GK_RETURN_IF_ERROR(
        null_args("audio_qkv", {{"config", config}, {"tensors", tensors}, {"prepared", prepared}}));
    return gk::audio_qkv_forward_prepared(handle, *config, *tensors, *prepared, workspace, workspace_bytes, stream);
  });
}

gk_status gk_audio_qkv_plan(gk_handle_t handle, const gk_audio_qkv_config* config, const gk_audio_qkv_tensors* tensors,
                            char* buf, size_t len) {
  return plan_entry("audio_qkv", gk::audio_qkv_plan, handle, config, tensors, buf, len);
}

}  // extern "C"
