#pragma once

#include "gk/gk.hpp"

namespace gk::gemma3 {

Status check_config(const Gemma3AttentionConfig& config);
Status check_tensors(const Gemma3AttentionConfig& config, const Gemma3AttentionTensors& tensors);
// The cache of a cached call (gk_gemma3_attention_check_cached), after the two checks above.
Status check_cache(const Gemma3AttentionConfig& config, const Gemma3AttentionTensors& tensors, const KvCache& cache);

}  // namespace gk::gemma3
