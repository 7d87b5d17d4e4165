// The Gemma3 layer's contract and its split calls' (gk_gemma3_qkv_*, gk_gemma3_attend_*), checked on the host.
#pragma once

#include <initializer_list>
#include <utility>

#include "gk/gk.hpp"

namespace gk::gemma3 {

// `op` names the operator in the messages.
Status check_config(const Gemma3AttentionConfig& config, const char* op = "gemma3_attention");
Status check_tensors(const Gemma3AttentionConfig& config, const Gemma3AttentionTensors& tensors);
// The cache of a cached call (gk_gemma3_attention_check_cached), after the two checks above.
Status check_cache(const Gemma3AttentionConfig& config, const Gemma3AttentionTensors& tensors, const KvCache& cache);
// The cache's shapes, dtypes and the caller's bound on its lengths (any call with a cache).
Status check_cache_shape(const char* op, const Gemma3AttentionConfig& config, const KvCache& cache);
// A call that writes the cache: k and v share no byte with `others`, the lengths or each other.
Status check_cache_written(const char* op, const KvCache& cache,
                           std::initializer_list<std::pair<const char*, const gk_tensor*>> others);
// The split calls' tensors (after check_config): qkv's with its optional cache, attend's with its cache.
Status check_qkv_tensors(const Gemma3AttentionConfig& config, const Gemma3QkvTensors& tensors, const KvCache* cache);
Status check_attend(const Gemma3AttentionConfig& config, const Gemma3AttendTensors& tensors, const KvCache& cache);

}  // namespace gk::gemma3
