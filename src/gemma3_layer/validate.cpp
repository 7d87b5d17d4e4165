// The operator's contract, checked before anything touches the device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "common/checked_math.hpp"
#include "common/status_util.hpp"
#include "common/tensor_check.hpp"
#include "attention/params.hpp"
#include "gemma3_layer/validate.hpp"

namespace gk::gemma3 {

using detail::error;

namespace {
constexpr const char* kOp = "gemma3_attention";
constexpr const char* kQkvOp = "gemma3_qkv";
constexpr const char* kAttendOp = "gemma3_attend";
constexpr int kMaxGroupSize = 8;
// Keeps every tile-index expression in the kernels far from int32 overflow.
constexpr int64_t kMaxSeqLen = int64_t(1) << 24;
}  // namespace

Status check_config(const Gemma3AttentionConfig& c, const char* op) {
  if (c.batch < 1) return error(GK_STATUS_INVALID_ARGUMENT, "%s: batch must be >= 1 (got %lld)", op, (long long)c.batch);
  if (c.seq_len < 1) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: seq_len must be >= 1 (got %lld)", op, (long long)c.seq_len);
  }
  if (c.seq_len > kMaxSeqLen) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: seq_len %lld exceeds the supported maximum %lld", op,
                 (long long)c.seq_len, (long long)kMaxSeqLen);
  }
  if (c.hidden < 64 || c.hidden % 64 != 0) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: hidden must be a positive multiple of 64 (got %lld)", op,
                 (long long)c.hidden);
  }
  if (c.num_kv_heads < 1) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: num_kv_heads must be >= 1 (got %lld)", op,
                 (long long)c.num_kv_heads);
  }
  if (c.num_q_heads < 1 || c.num_q_heads % c.num_kv_heads != 0) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: num_q_heads (%lld) must be a positive multiple of num_kv_heads (%lld)",
                 op, (long long)c.num_q_heads, (long long)c.num_kv_heads);
  }
  const int64_t group = c.num_q_heads / c.num_kv_heads;
  if (group > kMaxGroupSize) {
    return error(GK_STATUS_NOT_SUPPORTED, "%s: GQA group size num_q_heads/num_kv_heads = %lld is not supported (1..%d)",
                 op, (long long)group, kMaxGroupSize);
  }
  // The released models' head dims (1B/4B/12B: 256, 27B: 128); others (e.g. 64, 96) are valid but not built.
  if (c.head_dim != 128 && c.head_dim != 256) {
    return error(c.head_dim > 0 && c.head_dim % 2 == 0 ? GK_STATUS_NOT_SUPPORTED : GK_STATUS_INVALID_ARGUMENT,
                 "%s: head_dim %lld is not supported (supported: 128, 256)", op, (long long)c.head_dim);
  }
  if (!std::isfinite(c.softcap) || c.softcap < 0.f) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: softcap must be finite and >= 0, 0 disabling it (got %g)", op,
                 (double)c.softcap);
  }
  if (!std::isfinite(c.rms_norm_eps) || c.rms_norm_eps < 0.f) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: rms_norm_eps must be finite and >= 0 (got %g)", op,
                 (double)c.rms_norm_eps);
  }
  if (!std::isfinite(c.norm_weight_offset)) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: norm_weight_offset must be finite (got %g)", op,
                 (double)c.norm_weight_offset);
  }
  if (!std::isfinite(c.query_scale) || c.query_scale < 0.f) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: query_scale must be finite and >= 0, 0 selecting head_dim^-0.5 (got %g)",
                 op, (double)c.query_scale);
  }
  if (c.mask_mode != GK_MASK_CAUSAL && c.mask_mode != GK_MASK_ADDITIVE && c.mask_mode != GK_MASK_NONE) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: mask_mode %d is not one of causal (0), additive (1), none (2)", op,
                 (int)c.mask_mode);
  }
  if (c.sliding_window < 0) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: sliding_window must be >= 0, 0 disabling it (got %lld)", op,
                 (long long)c.sliding_window);
  }
  if (c.sliding_window > 0 && c.mask_mode != GK_MASK_CAUSAL) {
    return error(GK_STATUS_NOT_SUPPORTED, "%s: a sliding window is supported in causal mask mode only (mask_mode %d); "
                 "an additive mask can carry the window in its values", op, (int)c.mask_mode);
  }
  if (c.mask_mode == GK_MASK_ADDITIVE && c.seq_len > kMaxAdditiveMaskSeqLen) {
    return error(GK_STATUS_NOT_SUPPORTED, "%s: an additive mask supports seq_len up to %lld (got %lld); use mask mode "
                 "causal or none", op, (long long)kMaxAdditiveMaskSeqLen, (long long)c.seq_len);
  }
  // Token rows are indexed with 32-bit integers in the kernels' grids; keep M = B*S within int32.
  int64_t rows = 0;
  if (!detail::checked_product({c.batch, c.seq_len}, INT32_MAX, &rows)) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: batch*seq_len = %lld*%lld exceeds 2^31-1 rows", op,
                 (long long)c.batch, (long long)c.seq_len);
  }
  int64_t width = 0;
  if (!detail::checked_product({c.num_q_heads + 2 * c.num_kv_heads, c.head_dim}, INT32_MAX, &width) ||
      !detail::checked_product({rows, std::max(width, c.hidden)}, detail::kMaxTensorElements, &width)) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: batch*seq_len x projection width exceeds 2^48 elements", op);
  }
  return Status::Ok();
}

Status check_tensors(const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t) {
  const int64_t B = c.batch, S = c.seq_len, D = c.head_dim, Hq = c.num_q_heads, Hkv = c.num_kv_heads;
  using detail::check_tensor;
  using detail::TensorSpec;
  constexpr gk_dtype kBf16 = GK_DTYPE_BF16;
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.hidden_states, TensorSpec{"hidden_states", kBf16, {B, S, c.hidden}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.cos, TensorSpec{"cos", kBf16, {B, S, D}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.sin, TensorSpec{"sin", kBf16, {B, S, D}, 16}));
  if (c.mask_mode == GK_MASK_ADDITIVE) {
    int64_t n = 0;
    if (!detail::checked_product({B, S, S}, detail::kMaxTensorElements, &n)) {
      return error(GK_STATUS_INVALID_ARGUMENT, "%s: attention_mask [%lld, 1, %lld, %lld] exceeds 2^48 elements", kOp,
                   (long long)B, (long long)S, (long long)S);
    }
    GK_RETURN_IF_ERROR(check_tensor(kOp, t.attention_mask, TensorSpec{"attention_mask", kBf16, {B, 1, S, S}, 2}));
  }
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.q_proj_weight, TensorSpec{"q_proj_weight", kBf16, {Hq * D, c.hidden}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.k_proj_weight, TensorSpec{"k_proj_weight", kBf16, {Hkv * D, c.hidden}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.v_proj_weight, TensorSpec{"v_proj_weight", kBf16, {Hkv * D, c.hidden}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.o_proj_weight, TensorSpec{"o_proj_weight", kBf16, {c.hidden, Hq * D}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.q_norm_weight, TensorSpec{"q_norm_weight", kBf16, {D}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.k_norm_weight, TensorSpec{"k_norm_weight", kBf16, {D}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.out, TensorSpec{"out", kBf16, {B, S, c.hidden}, 16}));
  const gk_tensor none{};
  return detail::check_no_overlap(
      kOp, "out", t.out,
      {{"hidden_states", &t.hidden_states}, {"cos", &t.cos}, {"sin", &t.sin},
       {"attention_mask", c.mask_mode == GK_MASK_ADDITIVE ? &t.attention_mask : &none},
       {"q_proj_weight", &t.q_proj_weight}, {"k_proj_weight", &t.k_proj_weight}, {"v_proj_weight", &t.v_proj_weight},
       {"o_proj_weight", &t.o_proj_weight}, {"q_norm_weight", &t.q_norm_weight}, {"k_norm_weight", &t.k_norm_weight}});
}

Status check_cache_shape(const char* op, const Gemma3AttentionConfig& c, const KvCache& cache) {
  using detail::check_tensor;
  using detail::TensorSpec;
  const int64_t B = c.batch, S = c.seq_len, D = c.head_dim, Hkv = c.num_kv_heads;
  if (cache.k_cache.ndim != 4) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: k_cache must be [B, num_kv_heads, max_len, head_dim] (got %d dims)",
                 op, (int)cache.k_cache.ndim);
  }
  const int64_t max_len = cache.k_cache.shape[2];
  if (max_len < 1 || max_len > kMaxSeqLen) {  // the kernels' key positions stay far from int32 overflow
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: k_cache's max_len %lld must be 1..%lld", op, (long long)max_len,
                 (long long)kMaxSeqLen);
  }
  GK_RETURN_IF_ERROR(check_tensor(op, cache.k_cache, TensorSpec{"k_cache", GK_DTYPE_BF16, {B, Hkv, max_len, D}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(op, cache.v_cache, TensorSpec{"v_cache", GK_DTYPE_BF16, {B, Hkv, max_len, D}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(op, cache.cache_seqlens, TensorSpec{"cache_seqlens", GK_DTYPE_I32, {B}, 4}));
  if (cache.cache_starts.data != nullptr) {
    GK_RETURN_IF_ERROR(check_tensor(op, cache.cache_starts, TensorSpec{"cache_starts", GK_DTYPE_I32, {B}, 4}));
  }
  if (cache.max_cached < 0 || cache.max_cached > max_len - S) {
    return error(GK_STATUS_INVALID_ARGUMENT,
                 "%s: the cache holds %lld tokens per sequence: max_cached %lld + seq_len %lld do not fit", op,
                 (long long)max_len, (long long)cache.max_cached, (long long)S);
  }
  return Status::Ok();
}

Status check_cache(const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t, const KvCache& cache) {
  GK_RETURN_IF_ERROR(check_cache_shape(kOp, c, cache));
  GK_RETURN_IF_ERROR(detail::check_no_overlap(kOp, "out", t.out, {{"cache_seqlens", &cache.cache_seqlens},
                                                                   {"cache_starts", &cache.cache_starts}}));
  return check_cache_written(kOp, cache,
                             {{"hidden_states", &t.hidden_states}, {"cos", &t.cos}, {"sin", &t.sin},
                              {"q_proj_weight", &t.q_proj_weight}, {"k_proj_weight", &t.k_proj_weight},
                              {"v_proj_weight", &t.v_proj_weight}, {"o_proj_weight", &t.o_proj_weight},
                              {"q_norm_weight", &t.q_norm_weight}, {"k_norm_weight", &t.k_norm_weight},
                              {"out", &t.out}});
}

Status check_cache_written(const char* op, const KvCache& cache,
                           std::initializer_list<std::pair<const char*, const gk_tensor*>> others) {
  std::vector<std::pair<const char*, const gk_tensor*>> read(others);
  read.emplace_back("cache_seqlens", &cache.cache_seqlens);
  read.emplace_back("cache_starts", &cache.cache_starts);
  for (const auto& [name, tensor] : read) {
    GK_RETURN_IF_ERROR(detail::check_no_overlap(op, "k_cache", cache.k_cache, {{name, tensor}}));
    GK_RETURN_IF_ERROR(detail::check_no_overlap(op, "v_cache", cache.v_cache, {{name, tensor}}));
  }
  return detail::check_no_overlap(op, "v_cache", cache.v_cache, {{"k_cache", &cache.k_cache}});
}

Status check_qkv_tensors(const Gemma3AttentionConfig& c, const Gemma3QkvTensors& t, const KvCache* cache) {
  const int64_t B = c.batch, S = c.seq_len, D = c.head_dim, Hq = c.num_q_heads, Hkv = c.num_kv_heads;
  using detail::check_tensor;
  using detail::TensorSpec;
  constexpr gk_dtype kBf16 = GK_DTYPE_BF16;
  constexpr const char* op = kQkvOp;
  GK_RETURN_IF_ERROR(check_tensor(op, t.hidden_states, TensorSpec{"hidden_states", kBf16, {B, S, c.hidden}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(op, t.cos, TensorSpec{"cos", kBf16, {B, S, D}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(op, t.sin, TensorSpec{"sin", kBf16, {B, S, D}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(op, t.q_proj_weight, TensorSpec{"q_proj_weight", kBf16, {Hq * D, c.hidden}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(op, t.k_proj_weight, TensorSpec{"k_proj_weight", kBf16, {Hkv * D, c.hidden}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(op, t.v_proj_weight, TensorSpec{"v_proj_weight", kBf16, {Hkv * D, c.hidden}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(op, t.q_norm_weight, TensorSpec{"q_norm_weight", kBf16, {D}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(op, t.k_norm_weight, TensorSpec{"k_norm_weight", kBf16, {D}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(op, t.q_out, TensorSpec{"q_out", kBf16, {B, Hq, S, D}, 16}));
  const std::initializer_list<std::pair<const char*, const gk_tensor*>> inputs = {
      {"hidden_states", &t.hidden_states}, {"cos", &t.cos}, {"sin", &t.sin}, {"q_proj_weight", &t.q_proj_weight},
      {"k_proj_weight", &t.k_proj_weight}, {"v_proj_weight", &t.v_proj_weight}, {"q_norm_weight", &t.q_norm_weight},
      {"k_norm_weight", &t.k_norm_weight}};
  GK_RETURN_IF_ERROR(detail::check_no_overlap(op, "q_out", t.q_out, inputs));
  if (cache != nullptr) {
    GK_RETURN_IF_ERROR(check_cache_shape(op, c, *cache));
    GK_RETURN_IF_ERROR(detail::check_no_overlap(op, "q_out", t.q_out, {{"cache_seqlens", &cache->cache_seqlens},
                                                                       {"cache_starts", &cache->cache_starts}}));
    return check_cache_written(op, *cache,
                               {{"hidden_states", &t.hidden_states}, {"cos", &t.cos}, {"sin", &t.sin},
                                {"q_proj_weight", &t.q_proj_weight}, {"k_proj_weight", &t.k_proj_weight},
                                {"v_proj_weight", &t.v_proj_weight}, {"q_norm_weight", &t.q_norm_weight},
                                {"k_norm_weight", &t.k_norm_weight}, {"q_out", &t.q_out}});
  }
  GK_RETURN_IF_ERROR(check_tensor(op, t.k_out, TensorSpec{"k_out", kBf16, {B, Hkv, S, D}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(op, t.v_out, TensorSpec{"v_out", kBf16, {B, Hkv, S, D}, 16}));
  GK_RETURN_IF_ERROR(detail::check_no_overlap(op, "k_out", t.k_out, inputs));
  GK_RETURN_IF_ERROR(detail::check_no_overlap(op, "v_out", t.v_out, inputs));
  GK_RETURN_IF_ERROR(detail::check_no_overlap(op, "k_out", t.k_out, {{"q_out", &t.q_out}}));
  return detail::check_no_overlap(op, "v_out", t.v_out, {{"q_out", &t.q_out}, {"k_out", &t.k_out}});
}

Status check_attend(const Gemma3AttentionConfig& c, const Gemma3AttendTensors& t, const KvCache& cache) {
  const int64_t B = c.batch, S = c.seq_len, D = c.head_dim, Hq = c.num_q_heads;
  using detail::check_tensor;
  using detail::TensorSpec;
  constexpr gk_dtype kBf16 = GK_DTYPE_BF16;
  constexpr const char* op = kAttendOp;
  if (c.mask_mode == GK_MASK_ADDITIVE) {
    return error(GK_STATUS_NOT_SUPPORTED, "%s: attention over a cache takes mask mode causal (with or without a "
                 "sliding window) or none, not additive", op);
  }
  GK_RETURN_IF_ERROR(check_tensor(op, t.query, TensorSpec{"query", kBf16, {B, Hq, S, D}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(op, t.o_proj_weight, TensorSpec{"o_proj_weight", kBf16, {c.hidden, Hq * D}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(op, t.out, TensorSpec{"out", kBf16, {B, S, c.hidden}, 16}));
  GK_RETURN_IF_ERROR(check_cache_shape(op, c, cache));
  return detail::check_no_overlap(op, "out", t.out,
                                  {{"query", &t.query}, {"o_proj_weight", &t.o_proj_weight},
                                   {"k_cache", &cache.k_cache}, {"v_cache", &cache.v_cache},
                                   {"cache_seqlens", &cache.cache_seqlens}, {"cache_starts", &cache.cache_starts}});
}

}  // namespace gk::gemma3

namespace gk {

Status gemma3_attention_check(const Gemma3AttentionConfig& config, const Gemma3AttentionTensors& tensors) {
  GK_RETURN_IF_ERROR(gemma3::check_config(config));
  return gemma3::check_tensors(config, tensors);
}

Status gemma3_qkv_check(const Gemma3AttentionConfig& c, const Gemma3QkvTensors& t, const KvCache* cache) {
  GK_RETURN_IF_ERROR(gemma3::check_config(c, gemma3::kQkvOp));
  return gemma3::check_qkv_tensors(c, t, cache);
}

Status gemma3_attend_check(const Gemma3AttentionConfig& c, const Gemma3AttendTensors& t, const KvCache& cache) {
  GK_RETURN_IF_ERROR(gemma3::check_config(c, gemma3::kAttendOp));
  return gemma3::check_attend(c, t, cache);
}

Status gemma3_attention_check_cached(const Gemma3AttentionConfig& c, const Gemma3AttentionTensors& t,
                                     const KvCache& cache) {
  GK_RETURN_IF_ERROR(gemma3::check_config(c));
  if (c.mask_mode == GK_MASK_ADDITIVE) {
    return detail::error(GK_STATUS_NOT_SUPPORTED, "%s: a key/value cache takes mask mode causal (with or without a "
                         "sliding window) or none, not additive", gemma3::kOp);
  }
  GK_RETURN_IF_ERROR(gemma3::check_tensors(c, t));
  return gemma3::check_cache(c, t, cache);
}

}  // namespace gk
