// The audio QKV operator: contract checks and the execution of its plan (plan.cpp): one fused Hopper kernel in
// tf32 mode (the split-K kernel within one wave, the persistent head-tiled GEMM beyond; v's inputs rounded to nearest,
// q's and k's truncated, whose norm removes truncation's bias) and the split-K 3xTF32 kernel in exact mode; three
// cuBLASLt GEMMs (fast-tf32, whose kernels round their operands to nearest as the GPU test AudioRounding checks, or
// fp32 FMA) and the norm kernel beside the next GEMM where the plan says so.
#include <cmath>
#include <cstdint>
#include <vector>

#include "audio_qkv/launchers.hpp"
#include "audio_qkv/plan.hpp"
#include "audio_qkv/params.hpp"
#include "common/checked_math.hpp"
#include "common/cuda_check.hpp"
#include "common/gemm.hpp"
#include "common/status_util.hpp"
#include "common/tensor_check.hpp"
#include "common/workspace.hpp"
#include "api/handle.hpp"

namespace gk {

namespace {

constexpr const char* kOp = "audio_qkv";
using detail::error;

Status check_config(const AudioQkvConfig& c) {
  if (c.batch < 1) return error(GK_STATUS_INVALID_ARGUMENT, "%s: batch must be >= 1 (got %lld)", kOp, (long long)c.batch);
  if (c.seq_len < 1) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: seq_len must be >= 1 (got %lld)", kOp, (long long)c.seq_len);
  }
  if (c.hidden < 64 || c.hidden % 64 != 0) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: hidden must be a positive multiple of 64 (got %lld)", kOp,
                 (long long)c.hidden);
  }
  if (c.num_heads < 1) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: num_heads must be >= 1 (got %lld)", kOp, (long long)c.num_heads);
  }
  if (c.head_dim != 128) {
    return error(c.head_dim == 256 ? GK_STATUS_NOT_SUPPORTED : GK_STATUS_INVALID_ARGUMENT,
                 "%s: head_dim %lld is not supported (supported: 128)", kOp, (long long)c.head_dim);
  }
  if (!std::isfinite(c.eps) || c.eps < 0.f) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: eps must be finite and >= 0 (got %g)", kOp, (double)c.eps);
  }
  if (c.precision != GK_PRECISION_TF32 && c.precision != GK_PRECISION_EXACT) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: precision %d is not one of tf32 (0), exact (1)", kOp,
                 (int)c.precision);
  }
  int64_t rows = 0, n = 0;
  if (!detail::checked_product({c.batch, c.seq_len}, INT32_MAX, &rows)) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: batch*seq_len = %lld*%lld exceeds 2^31-1 rows", kOp,
                 (long long)c.batch, (long long)c.seq_len);
  }
  if (!detail::checked_product({c.num_heads, c.head_dim}, INT32_MAX, &n) ||
      !detail::checked_product({rows, std::max(n, c.hidden)}, detail::kMaxTensorElements, &n)) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: batch*seq_len x projection width exceeds 2^48 elements", kOp);
  }
  return Status::Ok();
}

struct Layout {
  void* gemm_workspace = nullptr;
  // tf32 mode: v's weights rounded to tf32 for the persistent kernel, or the split kernel's rounded activations
  float* rounded = nullptr;
  int64_t rounded_floats = 0;
  float* split_a = nullptr;  // exact mode: the activations' big and small tf32 parts (2 M x K) for the fused kernel
  int64_t split_floats = 0;
  audio::F16Operands f16{};  // tf32 mode on fp16 tensor cores: the operand passes' output
  size_t bytes = 0;
};

Layout carve(const AudioQkvConfig& c, void* base) {
  detail::WorkspaceCarver w(base);
  Layout l;
  l.gemm_workspace = w.take_bytes(detail::kGemmWorkspaceBytes);
  if (c.precision == GK_PRECISION_TF32) {
    l.rounded_floats = audio::tf32_scratch_floats(c.batch * c.seq_len, c.hidden, c.num_heads);
    l.rounded = w.take<float>(l.rounded_floats);
  } else {
    l.split_floats = audio::exact_scratch_floats(c.batch * c.seq_len, c.hidden, c.num_heads);
    l.split_a = w.take<float>(l.split_floats);
  }
  // The fp16 path's operands (one term in tf32 mode, two in exact mode), while its activations stay within bound.
  const int64_t rows = c.batch * c.seq_len, w_rows = 3 * c.num_heads * c.head_dim;
  l.f16.terms = c.precision == GK_PRECISION_TF32 ? 1 : 2;
  if (audio::f16_fits(rows, c.hidden, l.f16.terms)) {
    l.f16.a = w.take<uint16_t>(l.f16.terms * rows * c.hidden);
    l.f16.w = w.take<uint16_t>(l.f16.terms * w_rows * c.hidden);
    l.f16.a_exps = w.take<int32_t>(rows);
    l.f16.w_exps = w.take<int32_t>(w_rows);
  }
  l.bytes = w.bytes();
  return l;
}

// The three weights' checks (the forward pass's and gk_audio_qkv_prepare's).
Status check_weights(const AudioQkvConfig& c, const AudioQkvTensors& t) {
  using detail::check_tensor;
  using detail::TensorSpec;
  const int64_t n = c.num_heads * c.head_dim;
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.q_proj_weight, TensorSpec{"q_proj_weight", GK_DTYPE_F32, {n, c.hidden}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.k_proj_weight, TensorSpec{"k_proj_weight", GK_DTYPE_F32, {n, c.hidden}, 16}));
  return check_tensor(kOp, t.v_proj_weight, TensorSpec{"v_proj_weight", GK_DTYPE_F32, {n, c.hidden}, 16});
}

// Everything but the weights; `extra_input`: one more tensor the outputs must not overlap (the prepared weights).
Status check_activations(const AudioQkvConfig& c, const AudioQkvTensors& t, bool with_weights,
                         const gk_tensor* extra_input) {
  const int64_t B = c.batch, S = c.seq_len, H = c.num_heads, D = c.head_dim;
  using detail::check_tensor;
  using detail::TensorSpec;
  constexpr gk_dtype kF32 = GK_DTYPE_F32;
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.hidden_states, TensorSpec{"hidden_states", kF32, {B, S, c.hidden}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.q_norm_weight, TensorSpec{"q_norm_weight", kF32, {D}, 16}));
  GK_RETURN_IF_ERROR(check_tensor(kOp, t.k_norm_weight, TensorSpec{"k_norm_weight", kF32, {D}, 16}));
  std::vector<std::pair<const char*, const gk_tensor*>> inputs = {
      {"hidden_states", &t.hidden_states}, {"q_norm_weight", &t.q_norm_weight}, {"k_norm_weight", &t.k_norm_weight}};
  if (with_weights) {
    inputs.insert(inputs.end(), {{"q_proj_weight", &t.q_proj_weight}, {"k_proj_weight", &t.k_proj_weight},
                                 {"v_proj_weight", &t.v_proj_weight}});
  }
  if (extra_input != nullptr) inputs.push_back({"the prepared weights", extra_input});
  const std::pair<const char*, const gk_tensor*> outputs[] = {
      {"query_states", &t.query_states}, {"key_states", &t.key_states}, {"value_states", &t.value_states}};
  for (const auto& [name, out] : outputs) {
    GK_RETURN_IF_ERROR(check_tensor(kOp, *out, TensorSpec{name, kF32, {B, S, H, D}, 16}));
    for (const auto& in : inputs) GK_RETURN_IF_ERROR(detail::check_no_overlap(kOp, name, *out, {in}));
  }
  GK_RETURN_IF_ERROR(detail::check_no_overlap(kOp, "query_states", t.query_states,
                                              {{"key_states", &t.key_states}, {"value_states", &t.value_states}}));
  return detail::check_no_overlap(kOp, "key_states", t.key_states, {{"value_states", &t.value_states}});
}

// The prepared weights' layout in their buffer: the three weights' fp16 rows, then the rows' exponents.
struct PreparedLayout {
  uint16_t* w = nullptr;
  int32_t* exps = nullptr;
  size_t bytes = 0;
};

PreparedLayout prepared_layout(const AudioQkvConfig& c, void* base) {
  detail::WorkspaceCarver w(base);
  PreparedLayout l;
  const int64_t rows = 3 * c.num_heads * c.head_dim;
  l.w = w.take<uint16_t>(rows * c.hidden);
  l.exps = w.take<int32_t>(rows);
  l.bytes = w.bytes();
  return l;
}

// A prepared-weights buffer at `data` of `bytes`: present, 256-byte aligned and at least the layout's size; *as_tensor
// views its used part (fp16) for the overlap checks.
Status check_prepared_buffer(const AudioQkvConfig& c, const void* data, size_t bytes, gk_tensor* as_tensor) {
  const size_t need = prepared_layout(c, nullptr).bytes;
  if (data == nullptr || reinterpret_cast<uintptr_t>(data) % detail::WorkspaceCarver::kAlign != 0 || bytes < need) {
    return error(GK_STATUS_INVALID_ARGUMENT,
                 "%s: the prepared weights' buffer must be at least %zu bytes (gk_audio_qkv_prepared_size), 256-byte "
                 "aligned (got %p, %zu bytes)", kOp, need, data, bytes);
  }
  const int64_t half_elems = static_cast<int64_t>(need / 2);
  *as_tensor = gk_tensor_contiguous(const_cast<void*>(data), GK_DTYPE_F16, 1, &half_elems);
  return Status::Ok();
}

Status check_prepared_config(const AudioQkvConfig& c) {
  GK_RETURN_IF_ERROR(check_config(c));
  if (c.precision != GK_PRECISION_TF32) {
    return error(GK_STATUS_NOT_SUPPORTED, "%s: prepared weights take the tf32 mode (exact mode reads the fp32 weights)",
                 kOp);
  }
  if (c.hidden % audio::kF16BK != 0) {
    return error(GK_STATUS_NOT_SUPPORTED, "%s: prepared weights need hidden a multiple of %d (got %lld)", kOp,
                 audio::kF16BK, static_cast<long long>(c.hidden));
  }
  return Status::Ok();
}

// The fused kernels' parameters for a call (the weights' pointers null where the tensors' are).
audio::QkvGemmParams gemm_params(const AudioQkvConfig& c, const AudioQkvTensors& t) {
  audio::QkvGemmParams p{};
  p.hidden = static_cast<const float*>(t.hidden_states.data);
  p.wq = static_cast<const float*>(t.q_proj_weight.data);
  p.wk = static_cast<const float*>(t.k_proj_weight.data);
  p.wv = static_cast<const float*>(t.v_proj_weight.data);
  p.q_norm = static_cast<const float*>(t.q_norm_weight.data);
  p.k_norm = static_cast<const float*>(t.k_norm_weight.data);
  p.q = static_cast<float*>(t.query_states.data);
  p.k = static_cast<float*>(t.key_states.data);
  p.v = static_cast<float*>(t.value_states.data);
  p.m = static_cast<int>(c.batch * c.seq_len);
  p.k_dim = static_cast<int>(c.hidden);
  p.heads = static_cast<int>(c.num_heads);
  p.eps = c.eps;
  return p;
}

}  // namespace

Status audio_qkv_check(const AudioQkvConfig& c, const AudioQkvTensors& t) {
  GK_RETURN_IF_ERROR(check_config(c));
  // hidden_states first, then the weights: the order the messages name a broken tensor in has not changed.
  GK_RETURN_IF_ERROR(detail::check_tensor(
      kOp, t.hidden_states, detail::TensorSpec{"hidden_states", GK_DTYPE_F32, {c.batch, c.seq_len, c.hidden}, 16}));
  GK_RETURN_IF_ERROR(check_weights(c, t));
  return check_activations(c, t, /*with_weights=*/true, nullptr);
}

Status audio_qkv_workspace_size(const AudioQkvConfig& config, size_t* bytes) {
  if (bytes == nullptr) return error(GK_STATUS_INVALID_ARGUMENT, "%s: bytes is null", kOp);
  GK_RETURN_IF_ERROR(check_config(config));
  *bytes = carve(config, nullptr).bytes;
  return Status::Ok();
}

Status audio_qkv_plan(gk_handle_t handle, const AudioQkvConfig& c, const AudioQkvTensors& t, std::string* description) {
  GK_RETURN_IF_ERROR(audio_qkv_check(c, t));
  GK_RETURN_IF_ERROR(detail::check_handle(kOp, handle));
  audio::AudioPlan plan;
  GK_RETURN_IF_ERROR(audio::plan_audio(c, handle->device_info, handle->overrides, /*capturing=*/false,
                                       detail::kGemmWorkspaceBytes, &plan));
  *description = detail::format_overrides(plan.chosen);
  return Status::Ok();
}

Status audio_qkv_forward(gk_handle_t handle, const AudioQkvConfig& c, const AudioQkvTensors& t, void* workspace,
                         size_t workspace_bytes, gk_stream_t stream_in) {
  GK_RETURN_IF_ERROR(audio_qkv_check(c, t));
  GK_RETURN_IF_ERROR(detail::check_call(kOp, handle, workspace, workspace_bytes, carve(c, nullptr).bytes));
  auto stream = reinterpret_cast<cudaStream_t>(stream_in);
  const Layout ws = carve(c, workspace);
  const int64_t rows = c.batch * c.seq_len;
  const int64_t n = c.num_heads * c.head_dim;

  bool capturing = false;
  GK_RETURN_IF_ERROR(detail::stream_capturing(kOp, stream, &capturing));
  audio::AudioPlan plan;
  // The cuBLASLt workspace is idle on the fused paths: it holds the persistent kernel's stream-K state.
  GK_RETURN_IF_ERROR(audio::plan_audio(c, handle->device_info, handle->overrides, capturing,
                                       detail::kGemmWorkspaceBytes, &plan));
  if (plan.path != audio::AudioPath::kCublas) {
    const audio::QkvGemmParams p = gemm_params(c, t);
    detail::LaunchList launches;
    switch (plan.path) {
      case audio::AudioPath::kPersistentTf32:
        GK_RETURN_IF_ERROR(audio::prepare_qkv_tf32_persistent(p, plan, ws.rounded, ws.gemm_workspace,
                                                              detail::kGemmWorkspaceBytes, handle->next_epoch(),
                                                              &launches));
        break;
      case audio::AudioPath::kSplitkTf32:
        GK_RETURN_IF_ERROR(audio::prepare_qkv_tf32_splitk(p, plan, ws.rounded, ws.rounded_floats, &launches));
        break;
      case audio::AudioPath::kSplitkF16:
        GK_RETURN_IF_ERROR(audio::prepare_qkv_f16_splitk(p, plan, ws.f16, /*weights_prepared=*/false, &launches));
        break;
      default:
        GK_RETURN_IF_ERROR(audio::prepare_qkv_tf32x3_splitk(p, plan, ws.split_a, ws.split_floats, &launches));
    }
    return detail::issue_launches(kOp, launches, plan.graph ? &handle->graphs : nullptr, stream);
  }

  const void* hidden = t.hidden_states.data;
  const void* weights[3] = {t.q_proj_weight.data, t.k_proj_weight.data, t.v_proj_weight.data};
  const detail::GemmKind kind =
      c.precision == GK_PRECISION_TF32 ? detail::GemmKind::kF32FastTf32 : detail::GemmKind::kF32;
  const detail::GemmShape shape{rows, n, c.hidden, c.hidden, c.hidden, n, kind};
  void* outs[3] = {t.query_states.data, t.key_states.data, t.value_states.data};
  const float* norm_w[2] = {static_cast<const float*>(t.q_norm_weight.data),
                            static_cast<const float*>(t.k_norm_weight.data)};
  const char* names[3] = {"audio_qkv: q projection", "audio_qkv: k projection", "audio_qkv: v projection"};
  // Each norm (memory-bound) runs on the handle's side stream beside the next projection (compute-bound).
  detail::SideScope side(handle->side, kOp, stream);
  for (int i = 0; i < 3; ++i) {
    GK_RETURN_IF_ERROR(handle->gemm.run(names[i], shape, hidden, weights[i], outs[i], ws.gemm_workspace,
                                        detail::kGemmWorkspaceBytes, stream));
    if (i < 2) {
      GK_RETURN_IF_ERROR(side.fork());
      GK_RETURN_IF_ERROR(audio::launch_head_rmsnorm(static_cast<float*>(outs[i]), norm_w[i], rows,
                                                    static_cast<int>(c.num_heads), static_cast<int>(c.head_dim),
                                                    c.eps, side.stream()));
    }
  }
  return side.join();
}

Status audio_qkv_prepared_size(const AudioQkvConfig& config, size_t* bytes) {
  if (bytes == nullptr) return error(GK_STATUS_INVALID_ARGUMENT, "%s: bytes is null", kOp);
  GK_RETURN_IF_ERROR(check_prepared_config(config));
  *bytes = prepared_layout(config, nullptr).bytes;
  return Status::Ok();
}

Status audio_qkv_prepare(gk_handle_t handle, const AudioQkvConfig& c, const AudioQkvTensors& t, void* data,
                         size_t bytes, gk_stream_t stream, AudioQkvPrepared* prepared) {
  if (prepared == nullptr) return error(GK_STATUS_INVALID_ARGUMENT, "%s: prepared is null", kOp);
  GK_RETURN_IF_ERROR(check_prepared_config(c));
  GK_RETURN_IF_ERROR(check_weights(c, t));
  gk_tensor buffer;
  GK_RETURN_IF_ERROR(check_prepared_buffer(c, data, bytes, &buffer));
  GK_RETURN_IF_ERROR(detail::check_no_overlap(kOp, "the prepared weights' buffer", buffer,
                                              {{"q_proj_weight", &t.q_proj_weight},
                                               {"k_proj_weight", &t.k_proj_weight},
                                               {"v_proj_weight", &t.v_proj_weight}}));
  GK_RETURN_IF_ERROR(detail::check_handle(kOp, handle));
  const PreparedLayout l = prepared_layout(c, data);
  detail::KernelLaunch pass;
  audio::F16Matrix mats[3];
  audio::f16_weight_matrices(gemm_params(c, t), 1, l.w, l.exps, mats);
  GK_RETURN_IF_ERROR(audio::prepare_f16_rows(mats, 3, static_cast<int>(c.hidden), &pass));
  GK_RETURN_IF_ERROR(pass.issue(kOp, reinterpret_cast<cudaStream_t>(stream)));
  *prepared = AudioQkvPrepared{c.hidden, c.num_heads, c.head_dim, data, bytes};
  return Status::Ok();
}

Status audio_qkv_forward_prepared(gk_handle_t handle, const AudioQkvConfig& c, const AudioQkvTensors& t,
                                  const AudioQkvPrepared& prepared, void* workspace, size_t workspace_bytes,
                                  gk_stream_t stream) {
  GK_RETURN_IF_ERROR(check_prepared_config(c));
  if (prepared.hidden != c.hidden || prepared.num_heads != c.num_heads || prepared.head_dim != c.head_dim) {
    return error(GK_STATUS_INVALID_ARGUMENT,
                 "%s: the weights were prepared for hidden %lld, %lld heads of %lld, the call has %lld, %lld of %lld",
                 kOp, static_cast<long long>(prepared.hidden), static_cast<long long>(prepared.num_heads),
                 static_cast<long long>(prepared.head_dim), static_cast<long long>(c.hidden),
                 static_cast<long long>(c.num_heads), static_cast<long long>(c.head_dim));
  }
  gk_tensor prepared_bytes;
  GK_RETURN_IF_ERROR(check_prepared_buffer(c, prepared.data, prepared.bytes, &prepared_bytes));
  GK_RETURN_IF_ERROR(check_activations(c, t, /*with_weights=*/false, &prepared_bytes));
  GK_RETURN_IF_ERROR(detail::check_call(kOp, handle, workspace, workspace_bytes, carve(c, nullptr).bytes));
  const int64_t rows = c.batch * c.seq_len;
  if (!audio::splitk_supported(rows, c.hidden, c.num_heads) || !audio::f16_fits(rows, c.hidden, 1)) {
    return error(GK_STATUS_NOT_SUPPORTED,
                 "%s: %lld rows past what prepared weights take (the fp16 kernel's grid, and fp16 activations within "
                 "256 MiB)", kOp, static_cast<long long>(rows));
  }
  const Layout ws = carve(c, workspace);
  const PreparedLayout pl = prepared_layout(c, prepared.data);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  bool capturing = false;
  GK_RETURN_IF_ERROR(detail::stream_capturing(kOp, s, &capturing));
  const audio::AudioPlan plan =
      audio::plan_audio_f16(rows, c.hidden, c.num_heads, 1, handle->device_info, handle->overrides, capturing);
  const audio::F16Operands f16{1, ws.f16.a, pl.w, ws.f16.a_exps, pl.exps};
  detail::LaunchList launches;
  GK_RETURN_IF_ERROR(audio::prepare_qkv_f16_splitk(gemm_params(c, t), plan, f16, /*weights_prepared=*/true, &launches));
  return detail::issue_launches(kOp, launches, plan.graph ? &handle->graphs : nullptr, s);
}

}  // namespace gk
