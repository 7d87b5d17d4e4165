// Launch of the audio QKV projection on fp16 operands (issue 38): one pass makes the activations' and (unless
// prepared) the weights' fp16 operands with their row exponents (f16_rows.cuh), then the GEMM runs as its
// programmatic dependent, dividing the exponents back out: the ping-pong kernel (qkv_f16_pingpong_sm90.cuh; one term,
// no K split) or the cooperative split-K grid (qkv_f16_splitk_sm90.cuh; a K split, or two terms).
#include <cuda_runtime.h>

#include <algorithm>

#include "audio_qkv/launchers.hpp"
#include "audio_qkv/plan.hpp"
#include "audio_qkv/qkv_f16_pingpong_sm90.cuh"
#include "audio_qkv/qkv_f16_splitk_sm90.cuh"
#include "common/cuda_check.hpp"
#include "common/kernel_launch.hpp"
#include "common/tensor_map.hpp"

namespace gk::audio {

namespace {
constexpr const char* kOp = "audio_qkv";
}  // namespace

void f16_weight_matrices(const QkvGemmParams& p, int terms, uint16_t* w, int32_t* w_exps, F16Matrix* out) {
  const int64_t n = int64_t(p.heads) * kAudioHeadDim, w_elems = 3 * n * p.k_dim;
  const float* src[3] = {p.wq, p.wk, p.wv};
  for (int i = 0; i < 3; ++i) {
    uint16_t* hi = w + i * n * p.k_dim;
    out[i] = F16Matrix{src[i], n, hi, terms == 2 ? hi + w_elems : nullptr, w_exps + i * n};
  }
}

int f16_call_matrices(const QkvGemmParams& p, const F16Operands& f16, bool weights_prepared,
                      F16Matrix (&out)[kMaxF16Matrices]) {
  const int64_t a_elems = int64_t(p.m) * p.k_dim;
  out[0] = F16Matrix{p.hidden, p.m, f16.a, f16.terms == 2 ? f16.a + a_elems : nullptr, f16.a_exps};
  if (weights_prepared) return 1;
  f16_weight_matrices(p, f16.terms, f16.w, f16.w_exps, out + 1);
  return 4;
}

Status prepare_qkv_f16_splitk(const QkvGemmParams& params, const AudioPlan& plan, const F16Operands& f16,
                              bool weights_prepared, detail::LaunchList* out) {
  using Tr = QkvF16Traits<1>;  // the tile and K-block the kernels share
  QkvGemmParams p = params;
  const int split = plan.split, terms = f16.terms;
  const int64_t n = int64_t(p.heads) * Tr::kBN, w_rows = 3 * n;
  if (!splitk_supported(p.m, p.k_dim, p.heads) || p.k_dim % Tr::kBK != 0 || (split != 1 && split != 2 && split != 4) ||
      (p.k_dim / Tr::kBK) % split != 0 || (terms != 1 && terms != 2) ||
      (plan.f16_heads != 1 && (plan.f16_heads != 2 || !plan.f16_pingpong || p.heads % 2 != 0)) ||
      plan.f16_pingpong != (terms == 1 && split == 1) ||
      (plan.f16_cluster != 1 && (plan.f16_cluster != 2 || !plan.f16_pingpong || plan.f16_clusters <= 0))) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: M = %d, hidden %d, K split %d outside the fp16 kernel", kOp,
                         p.m, p.k_dim, split);
  }
  p.k_blocks = p.k_dim / Tr::kBK / split;
  p.a_exps = f16.a_exps;
  p.w_exps = f16.w_exps;
  F16Matrix mats[kMaxF16Matrices];
  GK_RETURN_IF_ERROR(
      prepare_f16_rows(mats, f16_call_matrices(params, f16, weights_prepared, mats), p.k_dim, out->add()));
  detail::KernelLaunch& gemm = *out->add();  // the pass's programmatic dependent
  // [rows, K] fp16 in 64-column x 128-row boxes (the ping-pong kernel's two-head tiles: 64-row activation boxes);
  // rows past the end read as zeros.
  const uint64_t k = uint64_t(p.k_dim), stride[1] = {k * 2};
  // The ping-pong kernel: 64-row weight boxes (two CTAs may share a tile's rows), and activation boxes of its tile's
  // rows (64 with two heads a tile).
  const bool pp = plan.f16_pingpong;
  const int rows_a_tile =
      !pp ? Tr::kBM : (plan.f16_heads == 2 ? QkvF16PingpongTraits<2>::kBM : QkvF16PingpongTraits<1>::kBM);
  const uint32_t a_box[2] = {Tr::kBK, uint32_t(rows_a_tile)};
  const uint32_t w_box[2] = {Tr::kBK, pp ? uint32_t(QkvF16PingpongTraits<1>::kWBoxRows) : uint32_t(Tr::kBN)};
  const uint64_t a_dims[2] = {k, uint64_t(terms) * p.m}, w_dims[2] = {k, uint64_t(terms * w_rows)};
  constexpr auto kF16 = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  CUtensorMap a_map, w_map;
  GK_RETURN_IF_ERROR(detail::encode_tiled_map(kOp, &a_map, kF16, 2, f16.a, a_dims, stride, a_box));
  GK_RETURN_IF_ERROR(detail::encode_tiled_map(kOp, &w_map, kF16, 2, f16.w, w_dims, stride, w_box));
  if (pp) {
    // Persistent: one CTA (or cluster) an SM (or as many as are resident), fewer where there are fewer units.
    const int cl = plan.f16_cluster;
    const int64_t m_tiles = (int64_t(p.m) + rows_a_tile - 1) / rows_a_tile;
    const int64_t units = (m_tiles + cl - 1) / cl * (3 * p.heads / plan.f16_heads);
    const int64_t resident = cl == 2 ? plan.f16_clusters : plan.sms;
    const dim3 grid(static_cast<unsigned>(std::max<int64_t>(1, std::min(units, resident))), 1, static_cast<unsigned>(cl));
    const auto make = [&](auto kernel, size_t smem) {
      const detail::LaunchShape shape{grid, QkvF16PingpongTraits<1>::kThreads, smem, cl == 2, /*programmatic=*/true};
      gemm = detail::KernelLaunch("fp16 QKV ping-pong kernel launch", kernel, shape, a_map, w_map, p);
    };
    if (plan.f16_heads == 2) {
      cl == 2 ? make(audio_qkv_f16_pingpong_kernel<2, 2>, QkvF16PingpongTraits<2, 2>::kSmemBytes)
              : make(audio_qkv_f16_pingpong_kernel<2, 1>, QkvF16PingpongTraits<2, 1>::kSmemBytes);
    } else {
      cl == 2 ? make(audio_qkv_f16_pingpong_kernel<1, 2>, QkvF16PingpongTraits<1, 2>::kSmemBytes)
              : make(audio_qkv_f16_pingpong_kernel<1, 1>, QkvF16PingpongTraits<1, 1>::kSmemBytes);
    }
    return Status::Ok();
  }
  const int64_t m_tiles = (int64_t(p.m) + Tr::kBM - 1) / Tr::kBM;
  const dim3 grid(static_cast<unsigned>(3 * p.heads), static_cast<unsigned>(m_tiles), static_cast<unsigned>(split));
  const char* what = "fp16 QKV kernel launch";
  const auto make = [&](auto kernel, size_t smem) {
    const int threads = terms == 1 ? QkvF16Traits<1>::kThreads : QkvF16Traits<2>::kThreads;
    const detail::LaunchShape shape{grid, threads, smem, split > 1, /*programmatic=*/true};
    gemm = detail::KernelLaunch(what, kernel, shape, a_map, w_map, p);
  };
  if (terms == 1) {
    make(audio_qkv_f16_kernel<1, true>, QkvF16Traits<1>::kSmemBytes);  // (one term without a split: ping-pong)
  } else {
    split > 1 ? make(audio_qkv_f16_kernel<2, true>, QkvF16Traits<2>::kSmemBytes)
              : make(audio_qkv_f16_kernel<2, false>, QkvF16Traits<2>::kSmemBytes);
  }
  return Status::Ok();
}

Status prepare_f16_kernels(detail::DeviceInfo* dev) {
  const auto opt_in = [](const void* kernel, size_t bytes) { return detail::set_smem_opt_in(kOp, kernel, bytes); };
  GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(audio_qkv_f16_kernel<1, true>), QkvF16Traits<1>::kSmemBytes));
  GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(audio_qkv_f16_pingpong_kernel<1, 1>),
                            QkvF16PingpongTraits<1, 1>::kSmemBytes));
  GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(audio_qkv_f16_pingpong_kernel<2, 1>),
                            QkvF16PingpongTraits<2, 1>::kSmemBytes));
  // The clustered forms: how many clusters of two are resident (their opt-in set on the way).
  GK_RETURN_IF_ERROR(detail::max_active_clusters(kOp, reinterpret_cast<const void*>(audio_qkv_f16_pingpong_kernel<1, 2>),
                                                 QkvF16PingpongTraits<1, 2>::kThreads,
                                                 QkvF16PingpongTraits<1, 2>::kSmemBytes, 2,
                                                 &dev->audio_f16_pingpong_clusters[0]));
  GK_RETURN_IF_ERROR(detail::max_active_clusters(kOp, reinterpret_cast<const void*>(audio_qkv_f16_pingpong_kernel<2, 2>),
                                                 QkvF16PingpongTraits<2, 2>::kThreads,
                                                 QkvF16PingpongTraits<2, 2>::kSmemBytes, 2,
                                                 &dev->audio_f16_pingpong_clusters[1]));
  GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(audio_qkv_f16_kernel<2, false>), QkvF16Traits<2>::kSmemBytes));
  return opt_in(reinterpret_cast<const void*>(audio_qkv_f16_kernel<2, true>), QkvF16Traits<2>::kSmemBytes);
}

}  // namespace gk::audio
