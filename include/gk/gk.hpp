// gemma-kernels public C++ API: the same operators as gk.h, with an owning Status and an RAII Handle.
// Host-only: no device code, no torch. The C ABI in gk.h is a thin layer over these functions.
#ifndef GK_GK_HPP_
#define GK_GK_HPP_

#include <cstddef>
#include <string>
#include <utility>

#include "gk/gk.h"

namespace gk {

using Gemma3AttentionConfig = gk_gemma3_attention_config;
using Gemma3AttentionTensors = gk_gemma3_attention_tensors;
using KvCache = gk_kv_cache;
using Gemma3QkvTensors = gk_gemma3_qkv_tensors;
using Gemma3AttendTensors = gk_gemma3_attend_tensors;
using AudioQkvConfig = gk_audio_qkv_config;
using AudioQkvTensors = gk_audio_qkv_tensors;

class Status {
 public:
  Status() = default;
  Status(gk_status code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == GK_STATUS_SUCCESS; }
  gk_status code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  gk_status code_ = GK_STATUS_SUCCESS;
  std::string message_;
};

// Move-only owner of a gk_handle_t.
class Handle {
 public:
  Handle() = default;
  ~Handle() { reset(); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      h_ = std::exchange(other.h_, nullptr);
    }
    return *this;
  }

  // Creates the handle on the current device.
  GK_API Status init();
  gk_handle_t get() const { return h_; }
  void reset() {
    if (h_ != nullptr) gk_handle_destroy(h_);
    h_ = nullptr;
  }

 private:
  gk_handle_t h_ = nullptr;
};

// gk_handle_set_overrides' C++ form.
GK_API Status set_overrides(gk_handle_t handle, const char* spec);

GK_API Status gemma3_attention_check(const Gemma3AttentionConfig& config, const Gemma3AttentionTensors& tensors);
GK_API Status gemma3_attention_workspace_size(const Gemma3AttentionConfig& config, size_t* bytes);
GK_API Status gemma3_attention_forward(gk_handle_t handle, const Gemma3AttentionConfig& config,
                                       const Gemma3AttentionTensors& tensors, void* workspace,
                                       size_t workspace_bytes, gk_stream_t stream);

// The layer for new tokens with a key/value cache (gk_gemma3_attention_forward_cached).
GK_API Status gemma3_attention_check_cached(const Gemma3AttentionConfig& config, const Gemma3AttentionTensors& tensors,
                                            const KvCache& cache);
GK_API Status gemma3_attention_forward_cached(gk_handle_t handle, const Gemma3AttentionConfig& config,
                                              const Gemma3AttentionTensors& tensors, const KvCache& cache,
                                              void* workspace, size_t workspace_bytes, gk_stream_t stream);
// The layer's two steps for caller-kept caches (gk_gemma3_qkv_*, gk_gemma3_attend_*); cache may be null for qkv.
GK_API Status gemma3_qkv_check(const Gemma3AttentionConfig& config, const Gemma3QkvTensors& tensors,
                               const KvCache* cache);
GK_API Status gemma3_qkv_workspace_size(const Gemma3AttentionConfig& config, size_t* bytes);
GK_API Status gemma3_qkv_forward(gk_handle_t handle, const Gemma3AttentionConfig& config,
                                 const Gemma3QkvTensors& tensors, const KvCache* cache, void* workspace,
                                 size_t workspace_bytes, gk_stream_t stream);
GK_API Status gemma3_attend_check(const Gemma3AttentionConfig& config, const Gemma3AttendTensors& tensors,
                                  const KvCache& cache);
GK_API Status gemma3_attend_workspace_size(const Gemma3AttentionConfig& config, size_t* bytes);
GK_API Status gemma3_attend_forward(gk_handle_t handle, const Gemma3AttentionConfig& config,
                                    const Gemma3AttendTensors& tensors, const KvCache& cache, void* workspace,
                                    size_t workspace_bytes, gk_stream_t stream);
// The plan a forward call with these arguments would run, in set_overrides' syntax (gk_gemma3_attention_plan).
GK_API Status gemma3_attention_plan(gk_handle_t handle, const Gemma3AttentionConfig& config,
                                    const Gemma3AttentionTensors& tensors, std::string* plan);
// The same for a call with a key/value cache (gemma3_attention_forward_cached; gk_gemma3_attention_plan_cached),
// its attention planned from the cache's bound on cached tokens (docs/dispatch.md).
GK_API Status gemma3_attention_plan_cached(gk_handle_t handle, const Gemma3AttentionConfig& config,
                                           const Gemma3AttentionTensors& tensors, const KvCache& cache,
                                           std::string* plan);

GK_API Status audio_qkv_check(const AudioQkvConfig& config, const AudioQkvTensors& tensors);
GK_API Status audio_qkv_workspace_size(const AudioQkvConfig& config, size_t* bytes);
GK_API Status audio_qkv_forward(gk_handle_t handle, const AudioQkvConfig& config, const AudioQkvTensors& tensors,
                                void* workspace, size_t workspace_bytes, gk_stream_t stream);
GK_API Status audio_qkv_plan(gk_handle_t handle, const AudioQkvConfig& config, const AudioQkvTensors& tensors,
                             std::string* plan);
using AudioQkvPrepared = gk_audio_qkv_prepared;
// Prepared weights (gk_audio_qkv_prepare).
GK_API Status audio_qkv_prepared_size(const AudioQkvConfig& config, size_t* bytes);
GK_API Status audio_qkv_prepare(gk_handle_t handle, const AudioQkvConfig& config, const AudioQkvTensors& tensors,
                                void* data, size_t bytes, gk_stream_t stream, AudioQkvPrepared* prepared);
GK_API Status audio_qkv_forward_prepared(gk_handle_t handle, const AudioQkvConfig& config,
                                         const AudioQkvTensors& tensors, const AudioQkvPrepared& prepared,
                                         void* workspace, size_t workspace_bytes, gk_stream_t stream);

}  // namespace gk

#endif  // GK_GK_HPP_
