#pragma once

#include "gk/gk.hpp"

namespace gk::gemma3 {

Status check_config(const Gemma3AttentionConfig& config);
Status check_tensors(const Gemma3AttentionConfig& config, const Gemma3AttentionTensors& tensors);

}  // namespace gk::gemma3
