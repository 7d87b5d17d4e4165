// Plain C++ references for both operators (no CUDA). They follow the operators' definition step by step,
// rounding to bf16 exactly where the layer's definition does, with dot products accumulated in double.
// Used by the host tests, by `gk run` without a GPU, and to validate the GPU reference on small shapes.
#pragma once

#include <cstdint>
#include <vector>

namespace gk_ref {

// Round-to-nearest-even float -> bf16 -> float (NaN stays NaN).
float round_bf16(float x);
uint16_t bf16_bits(float x);
float bf16_from_bits(uint16_t bits);

enum class Mask { kCausal, kAdditive, kNone };

struct Gemma3Dims {
  int64_t batch, seq_len, hidden, num_q_heads, num_kv_heads, head_dim;
  float softcap;  // 0 = off
  float eps;
  float norm_weight_offset;
  float query_scale;  // 0 = head_dim^-0.5
  Mask mask;
  int64_t window = 0;  // causal mask only, > 0: query i also sees no key j with i - j >= window (a sliding window)
  // false: round scores and probabilities to bf16 where the layer's definition does (the official yardstick).
  // true: keep the whole score chain (scale, softcap, mask, softmax, P) unrounded; q, k, v, the attention output
  // and the result are still bf16 tensors. A precise yardstick where bf16 score rounding is coarse (|score|
  // near a softcap of 50 rounds in steps of 0.25).
  bool fp32_scores = false;
};

// Every pointer holds bf16-representable floats in the operator's row-major shapes; `mask` [B,1,S,S] is read only
// for Mask::kAdditive. `out` receives [B,S,hidden] bf16-rounded values.
struct Gemma3Inputs {
  const float* hidden_states;
  const float* cos;
  const float* sin;
  const float* mask;
  const float* q_proj_weight;
  const float* k_proj_weight;
  const float* v_proj_weight;
  const float* o_proj_weight;
  const float* q_norm_weight;
  const float* k_norm_weight;
};

void gemma3_attention(const Gemma3Dims& dims, const Gemma3Inputs& in, float* out);

// Intermediates, exposed for tests that check one step: q after norm+RoPE [B,Hq,S,D], k [B,Hkv,S,D], v, and the
// attention output before the O projection [B,S,Hq*D].
struct Gemma3Intermediates {
  std::vector<float> q, k, v, attn;
};
void gemma3_attention(const Gemma3Dims& dims, const Gemma3Inputs& in, float* out, Gemma3Intermediates* steps);

// A key/value cache in Hugging Face's StaticCache layout: k and v [B, Hkv, max_len, D] (bf16-representable floats),
// seqlens [B] tokens already cached per sequence at positions 0 .. seqlens[b] - 1.
struct Gemma3Cache {
  float* k;
  float* v;
  int64_t max_len;
  const int64_t* seqlens;
  // Optional: per sequence, the first key its queries see (keys before it, a left-padded batch's pad tokens, are
  // hidden outright; a query that then sees no key gives zeros). Null: 0.
  const int64_t* starts = nullptr;
};
// The layer for dims.seq_len new tokens per sequence with a cache: their k and v go to positions seqlens[b] ..
// seqlens[b] + seq_len - 1 of the cache, and new query i (at absolute position seqlens[b] + i, which its cos and
// sin describe) attends over the cached and new keys, causally (within dims.window if set) in causal mode, or over
// all of them with no mask. False, changing nothing, where the call cannot be made: an additive mask, a cache too
// short for a sequence's cached and new tokens, a negative length.
bool gemma3_attention_cached(const Gemma3Dims& dims, const Gemma3Inputs& in, const Gemma3Cache& cache, float* out);

struct AudioDims {
  int64_t batch, seq_len, hidden, num_heads, head_dim;
  float eps;
};

// fp32 inputs; outputs in double ([B,S,H,D] each), computed entirely in double: the truth that both precision
// modes are measured against.
void audio_qkv(const AudioDims& dims, const float* hidden_states, const float* q_proj_weight,
               const float* k_proj_weight, const float* v_proj_weight, const float* q_norm_weight,
               const float* k_norm_weight, double* query, double* key, double* value);

}  // namespace gk_ref
