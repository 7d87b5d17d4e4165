// Simple GPU references for full-size checks: one obvious kernel per step, scalar arithmetic, no tensor cores,
// the same rounding points as the CPU reference (reference/cpu). They share no code with libgk.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "reference.hpp"

namespace gk_ref_gpu {

struct Gemma3DeviceInputs {
  const __nv_bfloat16* hidden_states;
  const __nv_bfloat16* cos;
  const __nv_bfloat16* sin;
  const __nv_bfloat16* mask;  // [B,1,S,S], read only for Mask::kAdditive
  const __nv_bfloat16* q_proj_weight;
  const __nv_bfloat16* k_proj_weight;
  const __nv_bfloat16* v_proj_weight;
  const __nv_bfloat16* o_proj_weight;
  const __nv_bfloat16* q_norm_weight;
  const __nv_bfloat16* k_norm_weight;
};

// Limits of the GPU reference: seq_len up to kMaxSeqLen (its row of scores lives in shared memory), head_dim a
// multiple of 8 (16-byte key loads).
constexpr int64_t kMaxSeqLen = 49152;

// Allocates its own scratch and synchronizes the stream before returning.
cudaError_t gemma3_attention(const gk_ref::Gemma3Dims& dims, const Gemma3DeviceInputs& in, __nv_bfloat16* out,
                             cudaStream_t stream);

// A key/value cache as gk_ref::Gemma3Cache describes it, on the device: k and v [B, Hkv, max_len, D]; seqlens, the
// cached lengths, on the host.
struct Gemma3DeviceCache {
  __nv_bfloat16* k = nullptr;
  __nv_bfloat16* v = nullptr;
  int64_t max_len = 0;
  const int64_t* seqlens = nullptr;
  const int64_t* starts = nullptr;  // optional, on the host: as gk_ref::Gemma3Cache::starts
};
// gk_ref::gemma3_attention_cached on the device (cudaErrorInvalidValue, nothing written, where that one refuses,
// or past kMaxSeqLen keys).
cudaError_t gemma3_attention_cached(const gk_ref::Gemma3Dims& dims, const Gemma3DeviceInputs& in,
                                    const Gemma3DeviceCache& cache, __nv_bfloat16* out, cudaStream_t stream);

// Outputs in double, [B,S,H,D] each.
cudaError_t audio_qkv(const gk_ref::AudioDims& dims, const float* hidden_states, const float* q_proj_weight,
                      const float* k_proj_weight, const float* v_proj_weight, const float* q_norm_weight,
                      const float* k_norm_weight, double* query, double* key, double* value, cudaStream_t stream);

// Building blocks, exposed for tests: y[m,n] = bf16(sum_k x[m,k] w[n,k]) with fp32 accumulation.
cudaError_t linear_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int64_t rows, int64_t in,
                        int64_t out, cudaStream_t stream);
// y[m,n] = sum_k x[m,k] w[n,k] accumulated in double.
cudaError_t linear_f64(const float* x, const float* w, double* y, int64_t rows, int64_t in, int64_t out,
                       cudaStream_t stream);

}  // namespace gk_ref_gpu
