// One operator call's worth of device buffers, generated inputs, the fast path, both references and the judge.
// Shared by the GPU tests and the CLI so they exercise the operators the same way.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <cstdint>
#include <vector>

#include "device_buffer.hpp"
#include "fill.hpp"
#include "gk/gk.hpp"
#include "judge.hpp"
#include "reference.hpp"

namespace gk_testkit {

struct Gemma3Recipe {
  uint64_t seed = 1;
  float activation_scale = 1.f;    // hidden_states = scale * randn (x30 drives the softcap into saturation)
  float norm_weight_spread = 0.f;  // 0: norm weights are ones (the suites' recipe); else 1 + spread * randn
  MaskPattern mask_pattern = MaskPattern::kCausal;  // contents of the mask tensor in additive mode
  // >= 0: keys anti-aligned with the queries. Every token's hidden state is near one direction (1 + 0.3 randn),
  // Wk is -Wq on the first Hkv heads, RoPE is the identity and both norm weights equal this value; with
  // Hq == Hkv every score is then about -(offset + w)^2 * D * scale, the far negative end of the softcap's range
  // (probabilities measured from the cap's bound itself rather than the row's max would underflow there; the
  // attention's fixed reference lifts that bound, src/attention/fixed_softmax.hpp).
  float anti_aligned_norm_weight = -1.f;
  // With anti_aligned_norm_weight >= 0: token t of each sequence has the first ceil(hidden * t / S) elements of its
  // hidden state negated, so that query i and key j overlap on all but about |i - j| / S of it and a score is about
  // -X (1 - 2 |i - j| / S) (X = (offset + w)^2 D scale): -X at j = i, a row's largest about
  // X (2 max(i, S - 1 - i) / S - 1), +X only for rows near either end. Rows then meet their largest scores in the
  // key tiles the kernels visit late (no mask: ascending keys, so rows of the first half rise with every tile;
  // causal: key tile 0 right after the diagonal one, which rows past S / 2 see above 0), the case where a running
  // maximum has to move far.
  bool anti_aligned_ramp = false;
};

struct AudioRecipe {
  uint64_t seed = 1;
  float activation_scale = 1.f;
  float norm_weight_spread = 0.f;  // 0: ones (the suites' recipe); else 1 + spread * randn
};

// How each input of a call is generated.
struct Gemma3Fills {
  FillSpec hidden, cos, sin, wq, wk, wv, wo, qn, kn;
};
struct AudioFills {
  FillSpec hidden, wq, wk, wv, qn, kn;
};
Gemma3Fills gemma3_fills(const gk_gemma3_attention_config& c, const Gemma3Recipe& r);
// A key/value cache's contents (Gemma3Problem with cached > 0, and the CLI's CPU-only path): unit-scale randn, as
// normalized keys are; `values` picks v's over k's.
inline FillSpec gemma3_cache_fill(const Gemma3Recipe& r, bool values) { return normal(sub_seed(r.seed, values ? 11 : 10), 1.f); }
AudioFills audio_fills(const gk_audio_qkv_config& c, const AudioRecipe& r);

// The same inputs on the host (bf16-rounded for the gemma3 operator), for the CPU-only path.
struct HostGemma3Inputs {
  std::vector<float> hidden, cos, sin, mask, wq, wk, wv, wo, qn, kn;
  gk_ref::Gemma3Inputs view() const;
};
HostGemma3Inputs generate_host(const gk_gemma3_attention_config& c, const Gemma3Recipe& r);
struct HostAudioInputs {
  std::vector<float> hidden, wq, wk, wv, qn, kn;
};
HostAudioInputs generate_host(const gk_audio_qkv_config& c, const AudioRecipe& r);

gk_ref::Gemma3Dims ref_dims(const gk_gemma3_attention_config& c);
gk_ref::AudioDims ref_dims(const gk_audio_qkv_config& c);

// Where the q, k and v projection weights lie in memory (the layer takes faster paths for some layouts).
enum class WeightLayout {
  kSeparate,   // three allocations, in the order q, k, v
  kPackedQkv,  // one allocation [Wq; Wk; Wv]: views of a fused q|k|v weight, as serving engines keep it
  kPackedQvk,  // one allocation [Wq; Wv; Wk]
  kVBeforeK,   // q's weights in one allocation, [Wv; Wk] in another: v's below k's, apart from q's
};

class Gemma3Problem {
 public:
  // mask_offset: the additive mask starts this many elements into its allocation (1: a mask that is 2-byte but
  // not 4-byte aligned, as a sliced tensor can be).
  // cached > 0: a key/value cache of cached + seq_len tokens per sequence holding `cached` random tokens (as a
  // decode step finds it): run() is then the cached call (gk_gemma3_attention_forward_cached), and the references
  // take the same cache. pad > 0 (at most cached): each sequence's first `pad` tokens are left padding
  // (gk_kv_cache::cache_starts), hidden from every query.
  explicit Gemma3Problem(const gk_gemma3_attention_config& config, int64_t mask_offset = 0,
                         WeightLayout weights = WeightLayout::kSeparate, int64_t cached = 0, int64_t pad = 0);

  const gk_gemma3_attention_config& config() const { return config_; }
  gk_gemma3_attention_tensors tensors() const;
  gk_kv_cache cache() const;  // cached > 0 only
  int64_t cached() const { return cached_; }

  void generate(const Gemma3Recipe& recipe, cudaStream_t stream);
  void poison_output(cudaStream_t stream);  // NaN everywhere: an unwritten element can never pass
  gk::Status run(gk_handle_t handle, cudaStream_t stream);
  // Fresh inputs, a poisoned output, one call: the start of every check.
  gk::Status run_fresh(const Gemma3Recipe& recipe, gk_handle_t handle, cudaStream_t stream) {
    generate(recipe, stream);
    poison_output(stream);
    return run(handle, stream);
  }
  // fp32_scores selects the precise yardstick (gk_ref::Gemma3Dims::fp32_scores) instead of the official one.
  void run_gpu_reference(cudaStream_t stream, bool fp32_scores = false);
  void run_cpu_reference(cudaStream_t stream, bool fp32_scores = false);  // inputs copied to the host; small shapes
  Judgement judge(double atol, double rtol, cudaStream_t stream) const;

  // Host copies (as floats) for the CPU reference and for tests.
  std::vector<float> download(const DeviceBuffer& buf, int64_t n, cudaStream_t stream) const;
  std::vector<float> download(const __nv_bfloat16* src, int64_t n, cudaStream_t stream) const;
  std::vector<float> output(cudaStream_t stream) const { return download(out_, out_elems(), stream); }
  std::vector<float> reference_output(cudaStream_t stream) const { return download(ref_, out_elems(), stream); }

 private:
  int64_t out_elems() const { return config_.batch * config_.seq_len * config_.hidden; }
  __nv_bfloat16* mask() const { return mask_.get() ? mask_.as<__nv_bfloat16>() + mask_offset_ : nullptr; }

  gk_gemma3_attention_config config_;
  int64_t mask_offset_ = 0;
  int64_t cached_ = 0;
  int64_t pad_ = 0;
  DeviceBuffer hidden_, cos_, sin_, mask_, wq_, wk_, wv_, wo_, qn_, kn_, out_, ref_, workspace_;
  // cached > 0: [B, Hkv, cached + S, D] each, and int32 [B]; pad > 0: the first keys, int32 [B]
  DeviceBuffer k_cache_, v_cache_, lens_, starts_;
  // The projection weights: into wq_, wk_, wv_, all three into wq_, or k's and v's into wk_ (WeightLayout).
  __nv_bfloat16 *wq_p_ = nullptr, *wk_p_ = nullptr, *wv_p_ = nullptr;
};

class AudioProblem {
 public:
  explicit AudioProblem(const gk_audio_qkv_config& config);

  const gk_audio_qkv_config& config() const { return config_; }
  gk_audio_qkv_tensors tensors() const;

  void generate(const AudioRecipe& recipe, cudaStream_t stream);
  void poison_output(cudaStream_t stream);
  // Every byte of the call's workspace set to `byte` (what a caller's reused workspace may hold).
  void fill_workspace(unsigned char byte, cudaStream_t stream);
  // q, k, v of the last call as raw bits, one after the other (for bit-exact comparisons).
  std::vector<uint32_t> output_bits(cudaStream_t stream) const;
  gk::Status run(gk_handle_t handle, cudaStream_t stream);
  gk::Status run_fresh(const AudioRecipe& recipe, gk_handle_t handle, cudaStream_t stream) {
    generate(recipe, stream);
    poison_output(stream);
    return run(handle, stream);
  }
  // The forward pass with weights prepared by gk_audio_qkv_prepare (from this problem's weights, or others).
  gk::Status run_prepared(gk_handle_t handle, const gk_audio_qkv_prepared& prepared, cudaStream_t stream);
  void run_gpu_reference(cudaStream_t stream);
  void run_cpu_reference(cudaStream_t stream);
  // The yardstick for exact mode: v = hs * Wv^T by cuBLAS SGEMM (fp32 FMA, default math mode) written over the
  // operator's v output, so judge() then reports plain fp32 cuBLAS's error on v.
  void run_cublas_fp32_v(cudaStream_t stream);
  // q, k, v judged against the fp64 reference.
  std::array<Judgement, 3> judge(double atol, double rtol, cudaStream_t stream) const;

 private:
  int64_t out_elems() const { return config_.batch * config_.seq_len * config_.num_heads * config_.head_dim; }

  gk_audio_qkv_config config_;
  DeviceBuffer hidden_, wq_, wk_, wv_, qn_, kn_, q_, k_, v_, ref_q_, ref_k_, ref_v_, workspace_;
};

// Input choices the two operators share (the mask pattern applies to gemma3's additive mode only).
struct InputOptions {
  float activation_scale = 1.f;
  float norm_weight_spread = 0.f;
  MaskPattern mask_pattern = MaskPattern::kCausal;
};

inline Gemma3Recipe gemma3_recipe(uint64_t seed, const InputOptions& in) {
  return {seed, in.activation_scale, in.norm_weight_spread, in.mask_pattern};
}
inline AudioRecipe audio_recipe(uint64_t seed, const InputOptions& in) {
  return {seed, in.activation_scale, in.norm_weight_spread};
}

// Either operator's problem behind one interface, for tools that run, judge and time them alike.
class OperatorProblem {
 public:
  virtual ~OperatorProblem() = default;
  static std::unique_ptr<OperatorProblem> make(const gk_gemma3_attention_config& config,
                                               WeightLayout weights = WeightLayout::kSeparate, int64_t cached = 0,
                                               int64_t pad = 0);
  // prepared_weights: each fresh run prepares the weights once (gk_audio_qkv_prepare) and run() takes them.
  static std::unique_ptr<OperatorProblem> make(const gk_audio_qkv_config& config, bool prepared_weights = false);

  virtual gk::Status run_fresh(uint64_t seed, const InputOptions& in, gk_handle_t handle, cudaStream_t stream) = 0;
  virtual gk::Status run(gk_handle_t handle, cudaStream_t stream) = 0;
  // The plan a call runs with this handle (gk_*_plan: the choices in the override syntax).
  virtual gk::Status plan(gk_handle_t handle, std::string* plan) const = 0;
  // The last output against the GPU (or CPU) reference, one judgement per output tensor ("out"; "q", "k", "v").
  virtual std::vector<std::pair<std::string, Judgement>> check(double atol, double rtol, bool cpu_reference,
                                                               cudaStream_t stream) = 0;
};

}  // namespace gk_testkit
