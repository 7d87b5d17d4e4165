#include "problems.hpp"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <stdexcept>

#include "reference_gpu.hpp"
#include "rng.hpp"

namespace gk_testkit {

namespace {

using bf16 = __nv_bfloat16;

gk_tensor tensor(void* p, gk_dtype dtype, std::initializer_list<int64_t> shape) {
  return gk_tensor_contiguous(p, dtype, static_cast<int32_t>(shape.size()), shape.begin());
}
gk_tensor tensor(const DeviceBuffer& b, gk_dtype dtype, std::initializer_list<int64_t> shape) {
  return tensor(b.get(), dtype, shape);
}

template <typename T>
DeviceBuffer alloc(int64_t n) {
  return DeviceBuffer(static_cast<size_t>(n) * sizeof(T));
}

std::vector<float> bf16_to_float(const std::vector<uint16_t>& bits) {
  std::vector<float> f(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) f[i] = gk_ref::bf16_from_bits(bits[i]);
  return f;
}

}  // namespace

Gemma3Fills gemma3_fills(const gk_gemma3_attention_config& c, const Gemma3Recipe& r) {
  const float w_in = 1.f / std::sqrt(float(c.hidden)), w_o = 1.f / std::sqrt(float(c.num_q_heads * c.head_dim));
  Gemma3Fills f;
  f.hidden = normal(sub_seed(r.seed, 1), r.activation_scale);
  f.cos = {FillKind::kRopeCos, sub_seed(r.seed, 2), 0.f};
  f.sin = {FillKind::kRopeSin, sub_seed(r.seed, 3), 0.f};
  f.wq = normal(sub_seed(r.seed, 4), w_in);
  f.wk = normal(sub_seed(r.seed, 5), w_in);
  f.wv = normal(sub_seed(r.seed, 6), w_in);
  f.wo = normal(sub_seed(r.seed, 7), w_o);
  f.qn = r.norm_weight_spread > 0.f ? around_one(sub_seed(r.seed, 8), r.norm_weight_spread) : constant(1.f);
  f.kn = r.norm_weight_spread > 0.f ? around_one(sub_seed(r.seed, 9), r.norm_weight_spread) : constant(1.f);
  if (r.anti_aligned_norm_weight >= 0.f) {
    f.hidden = around_one(sub_seed(r.seed, 1), 0.3f);
    f.wk = normal(sub_seed(r.seed, 4), -w_in);  // Wq's seed: element for element -Wq
    f.cos = constant(1.f);
    f.sin = constant(0.f);
    f.qn = f.kn = constant(r.anti_aligned_norm_weight);
    if (r.anti_aligned_ramp) {
      f.hidden.ramp_row = c.hidden;
      f.hidden.ramp_seq = c.seq_len;
    }
  }
  return f;
}

AudioFills audio_fills(const gk_audio_qkv_config& c, const AudioRecipe& r) {
  const float w = 1.f / std::sqrt(float(c.hidden));
  AudioFills f;
  f.hidden = normal(sub_seed(r.seed, 1), r.activation_scale);
  f.wq = normal(sub_seed(r.seed, 4), w);
  f.wk = normal(sub_seed(r.seed, 5), w);
  f.wv = normal(sub_seed(r.seed, 6), w);
  f.qn = r.norm_weight_spread > 0.f ? around_one(sub_seed(r.seed, 8), r.norm_weight_spread) : constant(1.f);
  f.kn = r.norm_weight_spread > 0.f ? around_one(sub_seed(r.seed, 9), r.norm_weight_spread) : constant(1.f);
  return f;
}

gk_ref::Gemma3Inputs HostGemma3Inputs::view() const {
  return {hidden.data(), cos.data(), sin.data(), mask.empty() ? nullptr : mask.data(), wq.data(), wk.data(),
          wv.data(),     wo.data(),  qn.data(),  kn.data()};
}

HostGemma3Inputs generate_host(const gk_gemma3_attention_config& c, const Gemma3Recipe& r) {
  const int64_t M = c.batch * c.seq_len, D = c.head_dim;
  const Gemma3Fills f = gemma3_fills(c, r);
  HostGemma3Inputs h;
  h.hidden = fill_host(f.hidden, M * c.hidden, true);
  h.cos = fill_host(f.cos, M * D, true);
  h.sin = fill_host(f.sin, M * D, true);
  h.wq = fill_host(f.wq, c.num_q_heads * D * c.hidden, true);
  h.wk = fill_host(f.wk, c.num_kv_heads * D * c.hidden, true);
  h.wv = fill_host(f.wv, c.num_kv_heads * D * c.hidden, true);
  h.wo = fill_host(f.wo, c.hidden * c.num_q_heads * D, true);
  h.qn = fill_host(f.qn, D, true);
  h.kn = fill_host(f.kn, D, true);
  if (c.mask_mode == GK_MASK_ADDITIVE) {
    h.mask.resize(static_cast<size_t>(c.batch * c.seq_len * c.seq_len));
    fill_mask_host(h.mask.data(), c.batch, c.seq_len, r.mask_pattern);
  }
  return h;
}

HostAudioInputs generate_host(const gk_audio_qkv_config& c, const AudioRecipe& r) {
  const int64_t M = c.batch * c.seq_len, N = c.num_heads * c.head_dim;
  const AudioFills f = audio_fills(c, r);
  HostAudioInputs h;
  h.hidden = fill_host(f.hidden, M * c.hidden, false);
  h.wq = fill_host(f.wq, N * c.hidden, false);
  h.wk = fill_host(f.wk, N * c.hidden, false);
  h.wv = fill_host(f.wv, N * c.hidden, false);
  h.qn = fill_host(f.qn, c.head_dim, false);
  h.kn = fill_host(f.kn, c.head_dim, false);
  return h;
}

gk_ref::Gemma3Dims ref_dims(const gk_gemma3_attention_config& c) {
  gk_ref::Gemma3Dims d{};
  d.batch = c.batch;
  d.seq_len = c.seq_len;
  d.hidden = c.hidden;
  d.num_q_heads = c.num_q_heads;
  d.num_kv_heads = c.num_kv_heads;
  d.head_dim = c.head_dim;
  d.softcap = c.softcap;
  d.eps = c.rms_norm_eps;
  d.norm_weight_offset = c.norm_weight_offset;
  d.query_scale = c.query_scale;
  d.mask = c.mask_mode == GK_MASK_ADDITIVE ? gk_ref::Mask::kAdditive
           : c.mask_mode == GK_MASK_NONE   ? gk_ref::Mask::kNone
                                           : gk_ref::Mask::kCausal;
  d.window = c.sliding_window;
  return d;
}

gk_ref::AudioDims ref_dims(const gk_audio_qkv_config& c) {
  return gk_ref::AudioDims{c.batch, c.seq_len, c.hidden, c.num_heads, c.head_dim, c.eps};
}

// ---------------------------------------------------------------------------------------------------------------
Gemma3Problem::Gemma3Problem(const gk_gemma3_attention_config& c, int64_t mask_offset, WeightLayout weights,
                             int64_t cached, int64_t pad)
    : config_(c), mask_offset_(mask_offset), cached_(cached), pad_(pad) {
  if (pad_ < 0 || pad_ > cached_) throw std::runtime_error("left padding of more tokens than the cache holds");
  const int64_t M = c.batch * c.seq_len, D = c.head_dim;
  hidden_ = alloc<bf16>(M * c.hidden);
  cos_ = alloc<bf16>(M * D);
  sin_ = alloc<bf16>(M * D);
  if (c.mask_mode == GK_MASK_ADDITIVE) mask_ = alloc<bf16>(c.batch * c.seq_len * c.seq_len + mask_offset_);
  const int64_t q_elems = c.num_q_heads * D * c.hidden, kv_elems = c.num_kv_heads * D * c.hidden;
  if (weights == WeightLayout::kSeparate) {
    wq_ = alloc<bf16>(q_elems);
    wk_ = alloc<bf16>(kv_elems);
    wv_ = alloc<bf16>(kv_elems);
    wq_p_ = wq_.as<bf16>();
    wk_p_ = wk_.as<bf16>();
    wv_p_ = wv_.as<bf16>();
  } else if (weights == WeightLayout::kVBeforeK) {
    // q's allocation padded, so that [Wv; Wk] can never follow Wq back to back (which would make it kPackedQvk).
    wq_ = alloc<bf16>(q_elems + 256);
    wk_ = alloc<bf16>(2 * kv_elems);
    wq_p_ = wq_.as<bf16>();
    wv_p_ = wk_.as<bf16>();
    wk_p_ = wv_p_ + kv_elems;
  } else {
    wq_ = alloc<bf16>(q_elems + 2 * kv_elems);
    wq_p_ = wq_.as<bf16>();
    const bool k_first = weights == WeightLayout::kPackedQkv;
    wk_p_ = wq_p_ + q_elems + (k_first ? 0 : kv_elems);
    wv_p_ = wq_p_ + q_elems + (k_first ? kv_elems : 0);
  }
  wo_ = alloc<bf16>(c.hidden * c.num_q_heads * D);
  qn_ = alloc<bf16>(D);
  kn_ = alloc<bf16>(D);
  out_ = alloc<bf16>(M * c.hidden);
  ref_ = alloc<bf16>(M * c.hidden);
  if (cached_ > 0) {
    const int64_t cache_elems = c.batch * c.num_kv_heads * (cached_ + c.seq_len) * D;
    k_cache_ = alloc<bf16>(cache_elems);
    v_cache_ = alloc<bf16>(cache_elems);
    lens_ = alloc<int>(c.batch);
    if (pad_ > 0) starts_ = alloc<int>(c.batch);
  }
  size_t ws = 0;
  const gk::Status s = gk::gemma3_attention_workspace_size(c, &ws);
  if (!s.ok()) throw std::runtime_error(s.message());
  workspace_.resize(ws);
}

gk_kv_cache Gemma3Problem::cache() const {
  const auto& c = config_;
  gk_kv_cache kv{};
  kv.k_cache = tensor(k_cache_, GK_DTYPE_BF16, {c.batch, c.num_kv_heads, cached_ + c.seq_len, c.head_dim});
  kv.v_cache = tensor(v_cache_, GK_DTYPE_BF16, {c.batch, c.num_kv_heads, cached_ + c.seq_len, c.head_dim});
  kv.cache_seqlens = tensor(lens_, GK_DTYPE_I32, {c.batch});
  kv.max_cached = cached_;
  if (pad_ > 0) kv.cache_starts = tensor(starts_, GK_DTYPE_I32, {c.batch});
  return kv;
}

gk_gemma3_attention_tensors Gemma3Problem::tensors() const {
  const auto& c = config_;
  const int64_t D = c.head_dim;
  gk_gemma3_attention_tensors t{};
  t.hidden_states = tensor(hidden_, GK_DTYPE_BF16, {c.batch, c.seq_len, c.hidden});
  t.cos = tensor(cos_, GK_DTYPE_BF16, {c.batch, c.seq_len, D});
  t.sin = tensor(sin_, GK_DTYPE_BF16, {c.batch, c.seq_len, D});
  const int64_t mask_shape[4] = {c.batch, 1, c.seq_len, c.seq_len};
  t.attention_mask = gk_tensor_contiguous(mask(), GK_DTYPE_BF16, 4, mask_shape);
  t.q_proj_weight = tensor(wq_p_, GK_DTYPE_BF16, {c.num_q_heads * D, c.hidden});
  t.k_proj_weight = tensor(wk_p_, GK_DTYPE_BF16, {c.num_kv_heads * D, c.hidden});
  t.v_proj_weight = tensor(wv_p_, GK_DTYPE_BF16, {c.num_kv_heads * D, c.hidden});
  t.o_proj_weight = tensor(wo_, GK_DTYPE_BF16, {c.hidden, c.num_q_heads * D});
  t.q_norm_weight = tensor(qn_, GK_DTYPE_BF16, {D});
  t.k_norm_weight = tensor(kn_, GK_DTYPE_BF16, {D});
  t.out = tensor(out_, GK_DTYPE_BF16, {c.batch, c.seq_len, c.hidden});
  return t;
}

void Gemma3Problem::generate(const Gemma3Recipe& r, cudaStream_t stream) {
  const auto& c = config_;
  const int64_t M = c.batch * c.seq_len, D = c.head_dim;
  const Gemma3Fills f = gemma3_fills(c, r);
  fill(f.hidden, hidden_.as<bf16>(), M * c.hidden, stream);
  fill(f.cos, cos_.as<bf16>(), M * D, stream);
  fill(f.sin, sin_.as<bf16>(), M * D, stream);
  fill(f.wq, wq_p_, c.num_q_heads * D * c.hidden, stream);
  fill(f.wk, wk_p_, c.num_kv_heads * D * c.hidden, stream);
  fill(f.wv, wv_p_, c.num_kv_heads * D * c.hidden, stream);
  fill(f.wo, wo_.as<bf16>(), c.hidden * c.num_q_heads * D, stream);
  fill(f.qn, qn_.as<bf16>(), D, stream);
  fill(f.kn, kn_.as<bf16>(), D, stream);
  if (mask() != nullptr) fill_mask(mask(), c.batch, c.seq_len, r.mask_pattern, stream);
  if (cached_ > 0) {  // the cached tokens' keys and values: unit-scale, as normalized keys are
    const int64_t cache_elems = c.batch * c.num_kv_heads * (cached_ + c.seq_len) * D;
    fill(gemma3_cache_fill(r, false), k_cache_.as<bf16>(), cache_elems, stream);
    fill(gemma3_cache_fill(r, true), v_cache_.as<bf16>(), cache_elems, stream);
    const std::vector<int> lens(static_cast<size_t>(c.batch), static_cast<int>(cached_));
    GK_TK_CUDA(cudaMemcpyAsync(lens_.get(), lens.data(), lens.size() * sizeof(int), cudaMemcpyHostToDevice, stream));
    const std::vector<int> starts(static_cast<size_t>(c.batch), static_cast<int>(pad_));
    if (pad_ > 0) {
      GK_TK_CUDA(cudaMemcpyAsync(starts_.get(), starts.data(), starts.size() * sizeof(int), cudaMemcpyHostToDevice,
                                 stream));
    }
    GK_TK_CUDA(cudaStreamSynchronize(stream));  // `lens` and `starts` live on this stack frame
  }
}

void Gemma3Problem::poison_output(cudaStream_t stream) { fill(constant(NAN), out_.as<bf16>(), out_elems(), stream); }

gk::Status Gemma3Problem::run(gk_handle_t handle, cudaStream_t stream) {
  if (cached_ > 0) {  // the call writes the new tokens' k and v over the same slots each time
    return gk::gemma3_attention_forward_cached(handle, config_, tensors(), cache(), workspace_.get(),
                                               workspace_.bytes(), stream);
  }
  return gk::gemma3_attention_forward(handle, config_, tensors(), workspace_.get(), workspace_.bytes(), stream);
}

void Gemma3Problem::run_gpu_reference(cudaStream_t stream, bool fp32_scores) {
  gk_ref_gpu::Gemma3DeviceInputs in{};
  in.hidden_states = hidden_.as<bf16>();
  in.cos = cos_.as<bf16>();
  in.sin = sin_.as<bf16>();
  in.mask = mask();
  in.q_proj_weight = wq_p_;
  in.k_proj_weight = wk_p_;
  in.v_proj_weight = wv_p_;
  in.o_proj_weight = wo_.as<bf16>();
  in.q_norm_weight = qn_.as<bf16>();
  in.k_norm_weight = kn_.as<bf16>();
  gk_ref::Gemma3Dims d = ref_dims(config_);
  d.fp32_scores = fp32_scores;
  if (cached_ > 0) {
    // The reference writes its own new k and v into the same slots, before it reads them; so does the next call.
    const std::vector<int64_t> lens(static_cast<size_t>(config_.batch), cached_);
    const std::vector<int64_t> starts(static_cast<size_t>(config_.batch), pad_);
    const gk_ref_gpu::Gemma3DeviceCache cache{k_cache_.as<bf16>(), v_cache_.as<bf16>(), cached_ + config_.seq_len,
                                              lens.data(), pad_ > 0 ? starts.data() : nullptr};
    GK_TK_CUDA(gk_ref_gpu::gemma3_attention_cached(d, in, cache, ref_.as<bf16>(), stream));
    GK_TK_CUDA(cudaStreamSynchronize(stream));  // `lens` and `starts` live on this stack frame
    return;
  }
  GK_TK_CUDA(gk_ref_gpu::gemma3_attention(d, in, ref_.as<bf16>(), stream));
}

std::vector<float> Gemma3Problem::download(const DeviceBuffer& buf, int64_t n, cudaStream_t stream) const {
  return download(buf.as<bf16>(), n, stream);
}

std::vector<float> Gemma3Problem::download(const bf16* src, int64_t n, cudaStream_t stream) const {
  std::vector<uint16_t> bits(static_cast<size_t>(n));
  GK_TK_CUDA(cudaMemcpyAsync(bits.data(), src, bits.size() * 2, cudaMemcpyDeviceToHost, stream));
  GK_TK_CUDA(cudaStreamSynchronize(stream));
  return bf16_to_float(bits);
}

void Gemma3Problem::run_cpu_reference(cudaStream_t stream, bool fp32_scores) {
  const auto& c = config_;
  const int64_t M = c.batch * c.seq_len, D = c.head_dim;
  const auto hs = download(hidden_, M * c.hidden, stream);
  const auto cs = download(cos_, M * D, stream);
  const auto sn = download(sin_, M * D, stream);
  const auto mk = mask() ? download(mask(), c.batch * c.seq_len * c.seq_len, stream) : std::vector<float>();
  const auto wq = download(wq_p_, c.num_q_heads * D * c.hidden, stream);
  const auto wk = download(wk_p_, c.num_kv_heads * D * c.hidden, stream);
  const auto wv = download(wv_p_, c.num_kv_heads * D * c.hidden, stream);
  const auto wo = download(wo_, c.hidden * c.num_q_heads * D, stream);
  const auto qn = download(qn_, D, stream);
  const auto kn = download(kn_, D, stream);
  gk_ref::Gemma3Inputs in{hs.data(), cs.data(), sn.data(), mk.empty() ? nullptr : mk.data(), wq.data(), wk.data(),
                          wv.data(), wo.data(), qn.data(), kn.data()};
  std::vector<float> out(static_cast<size_t>(out_elems()));
  gk_ref::Gemma3Dims d = ref_dims(c);
  d.fp32_scores = fp32_scores;
  if (cached_ > 0) {  // on a host copy of the cache (the reference writes the new tokens' k and v into it)
    const int64_t cache_elems = c.batch * c.num_kv_heads * (cached_ + c.seq_len) * D;
    auto kc = download(k_cache_, cache_elems, stream), vc = download(v_cache_, cache_elems, stream);
    const std::vector<int64_t> lens(static_cast<size_t>(c.batch), cached_), starts(static_cast<size_t>(c.batch), pad_);
    if (!gk_ref::gemma3_attention_cached(
            d, in, {kc.data(), vc.data(), cached_ + c.seq_len, lens.data(), pad_ > 0 ? starts.data() : nullptr},
            out.data())) {
      throw std::runtime_error("the CPU reference refused the cached call");
    }
  } else {
    gk_ref::gemma3_attention(d, in, out.data());
  }
  std::vector<uint16_t> bits(out.size());
  for (size_t i = 0; i < out.size(); ++i) bits[i] = gk_ref::bf16_bits(out[i]);
  GK_TK_CUDA(cudaMemcpyAsync(ref_.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice, stream));
  GK_TK_CUDA(cudaStreamSynchronize(stream));
}

Judgement Gemma3Problem::judge(double atol, double rtol, cudaStream_t stream) const {
  return judge_device(out_.as<bf16>(), ref_.as<bf16>(), out_elems(), atol, rtol, stream);
}

// ---------------------------------------------------------------------------------------------------------------
AudioProblem::AudioProblem(const gk_audio_qkv_config& c) : config_(c) {
  const int64_t M = c.batch * c.seq_len, N = c.num_heads * c.head_dim;
  hidden_ = alloc<float>(M * c.hidden);
  wq_ = alloc<float>(N * c.hidden);
  wk_ = alloc<float>(N * c.hidden);
  wv_ = alloc<float>(N * c.hidden);
  qn_ = alloc<float>(c.head_dim);
  kn_ = alloc<float>(c.head_dim);
  q_ = alloc<float>(M * N);
  k_ = alloc<float>(M * N);
  v_ = alloc<float>(M * N);
  ref_q_ = alloc<double>(M * N);
  ref_k_ = alloc<double>(M * N);
  ref_v_ = alloc<double>(M * N);
  size_t ws = 0;
  const gk::Status s = gk::audio_qkv_workspace_size(c, &ws);
  if (!s.ok()) throw std::runtime_error(s.message());
  workspace_.resize(ws);
}

gk_audio_qkv_tensors AudioProblem::tensors() const {
  const auto& c = config_;
  const int64_t N = c.num_heads * c.head_dim;
  gk_audio_qkv_tensors t{};
  t.hidden_states = tensor(hidden_, GK_DTYPE_F32, {c.batch, c.seq_len, c.hidden});
  t.q_proj_weight = tensor(wq_, GK_DTYPE_F32, {N, c.hidden});
  t.k_proj_weight = tensor(wk_, GK_DTYPE_F32, {N, c.hidden});
  t.v_proj_weight = tensor(wv_, GK_DTYPE_F32, {N, c.hidden});
  t.q_norm_weight = tensor(qn_, GK_DTYPE_F32, {c.head_dim});
  t.k_norm_weight = tensor(kn_, GK_DTYPE_F32, {c.head_dim});
  t.query_states = tensor(q_, GK_DTYPE_F32, {c.batch, c.seq_len, c.num_heads, c.head_dim});
  t.key_states = tensor(k_, GK_DTYPE_F32, {c.batch, c.seq_len, c.num_heads, c.head_dim});
  t.value_states = tensor(v_, GK_DTYPE_F32, {c.batch, c.seq_len, c.num_heads, c.head_dim});
  return t;
}

void AudioProblem::generate(const AudioRecipe& r, cudaStream_t stream) {
  const auto& c = config_;
  const int64_t M = c.batch * c.seq_len, N = c.num_heads * c.head_dim;
  const AudioFills f = audio_fills(c, r);
  fill(f.hidden, hidden_.as<float>(), M * c.hidden, stream);
  fill(f.wq, wq_.as<float>(), N * c.hidden, stream);
  fill(f.wk, wk_.as<float>(), N * c.hidden, stream);
  fill(f.wv, wv_.as<float>(), N * c.hidden, stream);
  fill(f.qn, qn_.as<float>(), c.head_dim, stream);
  fill(f.kn, kn_.as<float>(), c.head_dim, stream);
}

void AudioProblem::poison_output(cudaStream_t stream) {
  for (auto* b : {&q_, &k_, &v_}) fill(constant(NAN), b->as<float>(), out_elems(), stream);
}

void AudioProblem::fill_workspace(unsigned char byte, cudaStream_t stream) {
  GK_TK_CUDA(cudaMemsetAsync(workspace_.get(), byte, workspace_.bytes(), stream));
}

std::vector<uint32_t> AudioProblem::output_bits(cudaStream_t stream) const {
  const size_t n = size_t(out_elems());
  std::vector<uint32_t> bits(3 * n);
  const DeviceBuffer* outs[3] = {&q_, &k_, &v_};
  for (int o = 0; o < 3; ++o) {
    GK_TK_CUDA(cudaMemcpyAsync(bits.data() + o * n, outs[o]->get(), n * 4, cudaMemcpyDeviceToHost, stream));
  }
  GK_TK_CUDA(cudaStreamSynchronize(stream));
  return bits;
}

gk::Status AudioProblem::run(gk_handle_t handle, cudaStream_t stream) {
  return gk::audio_qkv_forward(handle, config_, tensors(), workspace_.get(), workspace_.bytes(), stream);
}

gk::Status AudioProblem::run_prepared(gk_handle_t handle, const gk_audio_qkv_prepared& prepared,
                                      cudaStream_t stream) {
  return gk::audio_qkv_forward_prepared(handle, config_, tensors(), prepared, workspace_.get(), workspace_.bytes(),
                                        stream);
}

void AudioProblem::run_gpu_reference(cudaStream_t stream) {
  GK_TK_CUDA(gk_ref_gpu::audio_qkv(ref_dims(config_), hidden_.as<float>(), wq_.as<float>(), wk_.as<float>(),
                                   wv_.as<float>(), qn_.as<float>(), kn_.as<float>(), ref_q_.as<double>(),
                                   ref_k_.as<double>(), ref_v_.as<double>(), stream));
}

void AudioProblem::run_cpu_reference(cudaStream_t stream) {
  const auto& c = config_;
  const int64_t M = c.batch * c.seq_len, N = c.num_heads * c.head_dim;
  const auto get = [&](const DeviceBuffer& b, int64_t n) {
    std::vector<float> h(static_cast<size_t>(n));
    GK_TK_CUDA(cudaMemcpyAsync(h.data(), b.get(), h.size() * 4, cudaMemcpyDeviceToHost, stream));
    GK_TK_CUDA(cudaStreamSynchronize(stream));
    return h;
  };
  const auto hs = get(hidden_, M * c.hidden), wq = get(wq_, N * c.hidden), wk = get(wk_, N * c.hidden),
             wv = get(wv_, N * c.hidden), qn = get(qn_, c.head_dim), kn = get(kn_, c.head_dim);
  std::vector<double> q(static_cast<size_t>(M * N)), k(q.size()), v(q.size());
  gk_ref::audio_qkv(ref_dims(c), hs.data(), wq.data(), wk.data(), wv.data(), qn.data(), kn.data(), q.data(),
                    k.data(), v.data());
  GK_TK_CUDA(cudaMemcpyAsync(ref_q_.get(), q.data(), q.size() * 8, cudaMemcpyHostToDevice, stream));
  GK_TK_CUDA(cudaMemcpyAsync(ref_k_.get(), k.data(), k.size() * 8, cudaMemcpyHostToDevice, stream));
  GK_TK_CUDA(cudaMemcpyAsync(ref_v_.get(), v.data(), v.size() * 8, cudaMemcpyHostToDevice, stream));
  GK_TK_CUDA(cudaStreamSynchronize(stream));
}

void AudioProblem::run_cublas_fp32_v(cudaStream_t stream) {
  const auto& c = config_;
  const int m = static_cast<int>(c.batch * c.seq_len), n = static_cast<int>(c.num_heads * c.head_dim),
            k = static_cast<int>(c.hidden);
  const auto ok = [](cublasStatus_t st) {
    if (st != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cuBLAS error " + std::to_string(int(st)));
  };
  cublasHandle_t raw = nullptr;
  ok(cublasCreate(&raw));
  const std::unique_ptr<cublasContext, cublasStatus_t (*)(cublasHandle_t)> handle(raw, cublasDestroy);
  cublasHandle_t h = handle.get();
  ok(cublasSetStream(h, stream));
  ok(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  const float one = 1.f, zero = 0.f;
  // Column-major view: v^T [n, m] = Wv (k x n, transposed) * hs^T (k x m).
  ok(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, wv_.as<float>(), k, hidden_.as<float>(), k, &zero,
                 v_.as<float>(), n));
  GK_TK_CUDA(cudaStreamSynchronize(stream));
}

std::array<Judgement, 3> AudioProblem::judge(double atol, double rtol, cudaStream_t stream) const {
  const int64_t n = out_elems();
  return {judge_device(q_.as<float>(), ref_q_.as<double>(), n, atol, rtol, stream),
          judge_device(k_.as<float>(), ref_k_.as<double>(), n, atol, rtol, stream),
          judge_device(v_.as<float>(), ref_v_.as<double>(), n, atol, rtol, stream)};
}

// ---------------------------------------------------------------------------------------------------------------
namespace {

gk::Status plan_of(gk_handle_t h, const Gemma3Problem& p, std::string* out) {
  if (p.cached() == 0) return gk::gemma3_attention_plan(h, p.config(), p.tensors(), out);
  const gk_kv_cache cache = p.cache();
  const gk::Status s = gk::gemma3_attention_plan_cached(h, p.config(), p.tensors(), cache, out);
  // A cached call's attention kernel is chosen from the device's lengths: the decode kernel up to 16 new tokens,
  // otherwise a prefill kernel's cached form.
  if (s.ok()) {
    *out += p.config().seq_len <= 16 ? " (cached call: decode kernel)"
                                     : " (cached call: a prefill kernel's cached form)";
  }
  return s;
}
gk::Status plan_of(gk_handle_t h, const AudioProblem& p, std::string* out) {
  return gk::audio_qkv_plan(h, p.config(), p.tensors(), out);
}

class Gemma3Operator : public OperatorProblem {
 public:
  Gemma3Operator(const gk_gemma3_attention_config& c, WeightLayout weights, int64_t cached, int64_t pad)
      : p_(c, 0, weights, cached, pad) {}
  gk::Status run_fresh(uint64_t seed, const InputOptions& in, gk_handle_t h, cudaStream_t s) override {
    return p_.run_fresh(gemma3_recipe(seed, in), h, s);
  }
  gk::Status run(gk_handle_t h, cudaStream_t s) override { return p_.run(h, s); }
  gk::Status plan(gk_handle_t h, std::string* out) const override { return plan_of(h, p_, out); }
  std::vector<std::pair<std::string, Judgement>> check(double atol, double rtol, bool cpu, cudaStream_t s) override {
    cpu ? p_.run_cpu_reference(s) : p_.run_gpu_reference(s);
    return {{"out", p_.judge(atol, rtol, s)}};
  }

 private:
  Gemma3Problem p_;
};

class AudioOperator : public OperatorProblem {
 public:
  AudioOperator(const gk_audio_qkv_config& c, bool prepared_weights) : p_(c), prepared_weights_(prepared_weights) {}
  gk::Status run_fresh(uint64_t seed, const InputOptions& in, gk_handle_t h, cudaStream_t s) override {
    p_.generate(audio_recipe(seed, in), s);
    p_.poison_output(s);
    if (prepared_weights_) {
      size_t bytes = 0;
      gk::Status st = gk::audio_qkv_prepared_size(p_.config(), &bytes);
      if (!st.ok()) return st;
      if (prepared_buf_.bytes() < bytes) prepared_buf_.resize(bytes);
      st = gk::audio_qkv_prepare(h, p_.config(), p_.tensors(), prepared_buf_.get(), bytes, s, &prepared_);
      if (!st.ok()) return st;
    }
    return run(h, s);
  }
  gk::Status run(gk_handle_t h, cudaStream_t s) override {
    return prepared_weights_ ? p_.run_prepared(h, prepared_, s) : p_.run(h, s);
  }
  gk::Status plan(gk_handle_t h, std::string* out) const override { return plan_of(h, p_, out); }
  std::vector<std::pair<std::string, Judgement>> check(double atol, double rtol, bool cpu, cudaStream_t s) override {
    cpu ? p_.run_cpu_reference(s) : p_.run_gpu_reference(s);
    const auto j = p_.judge(atol, rtol, s);
    return {{"q", j[0]}, {"k", j[1]}, {"v", j[2]}};
  }

 private:
  AudioProblem p_;
  bool prepared_weights_;
  DeviceBuffer prepared_buf_;
  gk_audio_qkv_prepared prepared_{};
};

}  // namespace

std::unique_ptr<OperatorProblem> OperatorProblem::make(const gk_gemma3_attention_config& c, WeightLayout weights,
                                                       int64_t cached, int64_t pad) {
  return std::make_unique<Gemma3Operator>(c, weights, cached, pad);
}

std::unique_ptr<OperatorProblem> OperatorProblem::make(const gk_audio_qkv_config& c, bool prepared_weights) {
  return std::make_unique<AudioOperator>(c, prepared_weights);
}

}  // namespace gk_testkit
