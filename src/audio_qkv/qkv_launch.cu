// Launch of the audio QKV kernels as the plan says (plan.cpp): the split-K kernels (tf32, and 3xTF32 for the exact
// mode; K split over a cluster along z) and the persistent head-tiled GEMM (projection/head_gemm) for tf32.
#include <cuda_runtime.h>

#include <type_traits>

#include "audio_qkv/launchers.hpp"
#include "audio_qkv/plan.hpp"
#include "audio_qkv/qkv_head_epilogue.cuh"
#include "audio_qkv/qkv_tf32_splitk_sm90.cuh"
#include "audio_qkv/qkv_tf32x3_splitk_sm90.cuh"
#include "common/cuda_check.hpp"
#include "common/kernel_launch.hpp"
#include "common/tensor_map.hpp"
#include "projection/head_gemm/head_gemm_launch.cuh"

namespace gk::audio {

namespace {

constexpr const char* kOp = "audio_qkv";
using HeadCfg = head_gemm::Tf32Config;
static_assert(QkvGemmTraits::kBM == kSplitkBM && QkvGemmTraits::kBK == kSplitkBK && QkvGemmTraits::kBN == kAudioHeadDim,
              "the planner's split-K tile (plan.hpp) is the kernels'");

struct Maps {
  CUtensorMap hs, hs_raw, wq, wk, wv;
};

// hs [hs_rows, K] (M, or 2M for the tf32x3 parts; the prepared copy where there is one), hs_raw the caller's [M, K]
// and each weight [H*128, K] as 32-column x 128-row fp32 boxes; rows past the end read as zeros.
Status encode_maps(const QkvGemmParams& p, const float* hs_raw, uint64_t hs_rows, Maps* maps) {
  using Tr = QkvGemmTraits;
  const uint64_t k = uint64_t(p.k_dim), stride[1] = {k * 4};
  const uint32_t box[2] = {Tr::kBK, Tr::kBM};
  const uint64_t hs_dims[2] = {k, hs_rows}, raw_dims[2] = {k, uint64_t(p.m)};
  const uint64_t w_dims[2] = {k, uint64_t(p.heads) * Tr::kBN};
  constexpr auto kF32 = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  GK_RETURN_IF_ERROR(detail::encode_tiled_map(kOp, &maps->hs, kF32, 2, p.hidden, hs_dims, stride, box));
  GK_RETURN_IF_ERROR(detail::encode_tiled_map(kOp, &maps->hs_raw, kF32, 2, hs_raw, raw_dims, stride, box));
  GK_RETURN_IF_ERROR(detail::encode_tiled_map(kOp, &maps->wq, kF32, 2, p.wq, w_dims, stride, box));
  GK_RETURN_IF_ERROR(detail::encode_tiled_map(kOp, &maps->wk, kF32, 2, p.wk, w_dims, stride, box));
  return detail::encode_tiled_map(kOp, &maps->wv, kF32, 2, p.wv, w_dims, stride, box);
}

// Whether the kernel also takes the caller's activations (the tf32 one: q's and k's CTAs read them truncated).
template <bool kRaw>
struct RawActivations {
  static constexpr bool kReadsRawActivations = kRaw;
};
template <bool kSplit>
struct Tf32Kernel : RawActivations<true> {
  static auto get() { return audio_qkv_gemm_kernel<kSplit>; }
};
template <bool kSplit>
struct Tf32x3Kernel : RawActivations<false> {
  static auto get() { return audio_qkv_3xtf32_kernel<kSplit>; }
};

// The tf32 kernel and the 3xTF32 one share the grid (one head of q, k or v per 128 rows), the tensor maps and the
// K split; they differ in threads, shared memory and how long a K-block takes. `hs_raw`: the caller's activations
// (params.hidden may point at a prepared copy).
template <class Tr, template <bool> class Kernel>
Status prepare_splitk(const QkvGemmParams& params, const float* hs_raw, const AudioPlan& plan, bool programmatic,
                      detail::KernelLaunch* out) {
  static_assert(Tr::kBM == QkvGemmTraits::kBM && Tr::kBN == QkvGemmTraits::kBN && Tr::kBK == QkvGemmTraits::kBK,
                "one tile shape for both kernels");
  QkvGemmParams p = params;
  const int split = plan.split;
  if (!splitk_supported(p.m, p.k_dim, p.heads) || (split != 1 && split != 2 && split != 4) ||
      (p.k_dim / Tr::kBK) % split != 0) {
    return detail::error(GK_STATUS_INTERNAL_ERROR,
                         "%s: M = %d, hidden %d, %d heads, K split %d outside the split-K kernel",
                         kOp, p.m, p.k_dim, p.heads, split);
  }
  const int64_t m_tiles = (int64_t(p.m) + Tr::kBM - 1) / Tr::kBM;
  const int64_t n_tiles = int64_t(3) * p.heads;
  p.k_blocks = p.k_dim / Tr::kBK / split;
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(m_tiles), static_cast<unsigned>(split));
  Maps maps;
  // tf32x3 parts: the big parts' M rows, then the small parts' (rows past M of the last row tile then read small
  // parts rather than zeros; their rows are independent of the stored ones and never stored).
  GK_RETURN_IF_ERROR(encode_maps(p, hs_raw, uint64_t(p.m) * (p.a_prepared ? Tr::kAParts : 1), &maps));
  const auto go = [&](auto kernel, bool cluster, int threads) {
    const detail::LaunchShape shape{grid, threads, Tr::kSmemBytes, cluster, programmatic};
    const char* what = "split-K QKV kernel launch";
    if constexpr (Kernel<true>::kReadsRawActivations) {
      *out = detail::KernelLaunch(what, kernel, shape, maps.hs, maps.hs_raw, maps.wq, maps.wk, maps.wv, p);
    } else {
      *out = detail::KernelLaunch(what, kernel, shape, maps.hs, maps.wq, maps.wk, maps.wv, p);
    }
    return Status::Ok();
  };
  if constexpr (std::is_same_v<Tr, QkvGemmTraits>) {
    if (plan.v_registers) {  // the kernel without rounding warps (the planner checked its preconditions)
      if (!p.a_prepared || !p.qk_truncated || p.k_blocks % 2 != 0) {
        return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: v in registers without its preconditions", kOp);
      }
      constexpr int kThreads = QkvGemmTraits::kThreadsNoRounding;
      return split > 1 ? go(audio_qkv_gemm_kernel<true, false>, true, kThreads)
                       : go(audio_qkv_gemm_kernel<false, false>, false, kThreads);
    }
  }
  return split > 1 ? go(Kernel<true>::get(), true, Tr::kThreads) : go(Kernel<false>::get(), false, Tr::kThreads);
}

// The split-K kernel with its activations first prepared into `scratch` by the launch `prepare(hidden, scratch,
// M * K, &launch)` makes (the kernel then launches as the pass's programmatic dependent and prepares only the weight
// tile), or both operands prepared in shared memory.
template <class Tr, template <bool> class Kernel, class Prepare>
Status splitk_launches(const QkvGemmParams& params, const AudioPlan& plan, float* scratch, int64_t scratch_floats,
                       const Prepare& prepare, detail::LaunchList* out) {
  const int64_t a_floats = int64_t(params.m) * params.k_dim;
  if (!plan.activations_prepass) return prepare_splitk<Tr, Kernel>(params, params.hidden, plan, false, out->add());
  if (Tr::kAParts * a_floats > scratch_floats) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: prepared activations past the workspace", kOp);
  }
  QkvGemmParams p = params;
  p.hidden = scratch;
  p.a_prepared = 1;
  GK_RETURN_IF_ERROR(prepare(params.hidden, scratch, a_floats, out->add()));
  return prepare_splitk<Tr, Kernel>(p, params.hidden, plan, /*programmatic=*/true, out->add());
}

}  // namespace

Status prepare_audio_kernels(detail::DeviceInfo* dev) {
  // The forms without a K split and the tf32 kernel without rounding warps (the others get theirs from the
  // residency queries).
  const auto opt_in = [](const void* kernel, size_t bytes) { return detail::set_smem_opt_in(kOp, kernel, bytes); };
  GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(Tf32Kernel<false>::get()), QkvGemmTraits::kSmemBytes));
  GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(audio_qkv_gemm_kernel<true, false>), QkvGemmTraits::kSmemBytes));
  GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(audio_qkv_gemm_kernel<false, false>), QkvGemmTraits::kSmemBytes));
  GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(Tf32x3Kernel<false>::get()), Qkv3xTf32Traits::kSmemBytes));
  GK_RETURN_IF_ERROR(prepare_f16_kernels(dev));
  for (int s = 2; s <= 4; s += 2) {
    GK_RETURN_IF_ERROR(detail::max_active_clusters(kOp, reinterpret_cast<const void*>(Tf32Kernel<true>::get()),
                                                   QkvGemmTraits::kThreads, QkvGemmTraits::kSmemBytes, s,
                                                   &dev->audio_tf32_clusters[s]));
    GK_RETURN_IF_ERROR(detail::max_active_clusters(kOp, reinterpret_cast<const void*>(Tf32x3Kernel<true>::get()),
                                                   Qkv3xTf32Traits::kThreads, Qkv3xTf32Traits::kSmemBytes, s,
                                                   &dev->audio_tf32x3_clusters[s]));
  }
  return head_gemm::resident_clusters<HeadCfg, HeadQkvEpilogue>(kOp, &dev->head_gemm_clusters);
}

Status prepare_qkv_tf32_splitk(const QkvGemmParams& params, const AudioPlan& plan, float* scratch,
                               int64_t scratch_floats, detail::LaunchList* out) {
  const auto round = [&](const float* a, float* dst, int64_t n, detail::KernelLaunch* out) {
    return prepare_round_tf32(&a, 1, dst, n, plan.sms, out);
  };
  QkvGemmParams p = params;
  p.qk_truncated = 1;  // the pass's rounded activations then serve v's CTAs only
  return splitk_launches<QkvGemmTraits, Tf32Kernel>(p, plan, scratch, scratch_floats, round, out);
}

Status prepare_qkv_tf32x3_splitk(const QkvGemmParams& params, const AudioPlan& plan, float* scratch,
                                 int64_t scratch_floats, detail::LaunchList* out) {
  const auto parts = [&](const float* a, float* dst, int64_t n, detail::KernelLaunch* out) {
    return prepare_tf32x3_parts(a, dst, n, plan.sms, out);
  };
  return splitk_launches<Qkv3xTf32Traits, Tf32x3Kernel>(params, plan, scratch, scratch_floats, parts, out);
}

Status prepare_qkv_tf32_persistent(const QkvGemmParams& p, const AudioPlan& plan, float* rounded_wv, void* sk_scratch,
                                   size_t sk_scratch_bytes, uint64_t epoch, detail::LaunchList* out) {
  HeadQkvEpilogue::Params ep{};
  ep.out[0] = p.q;
  ep.out[1] = p.k;
  ep.out[2] = p.v;
  ep.norm[0] = p.q_norm;
  ep.norm[1] = p.k_norm;
  ep.norm[2] = nullptr;
  ep.out_row_stride = int64_t(p.heads) * QkvGemmTraits::kBN;  // a tile is one head
  ep.eps = p.eps;
  // q and k read truncated (their norm removes truncation's bias: qkv_tf32_splitk_sm90.cuh), so only v's weights
  // are rounded and only v's tiles round their A fragments.
  head_gemm::Operands o = persistent_shape(p.m, p.k_dim, p.heads);
  o.a = p.hidden;
  o.w[0] = p.wq;
  o.w[1] = p.wk;
  o.w[2] = rounded_wv;
  o.round_a_segments = 1u << 2;
  if (plan.grid.sk.run > 0) {
    o.sk_scratch = sk_scratch;
    o.sk_scratch_bytes = sk_scratch_bytes;
    o.sk_epoch = epoch;
  }
  o.lag_last_segment = plan.lag_last_segment;
  if (!plan.v_round_in_kernel) {
    GK_RETURN_IF_ERROR(prepare_round_tf32(&p.wv, 1, rounded_wv, int64_t(p.heads) * QkvGemmTraits::kBN * p.k_dim,
                                          plan.sms, out->add()));
  } else {
    o.prep_seg = 2;
    o.prep_src = p.wv;
    o.prep_slots = head_gemm::prep_slots_in(sk_scratch, sk_scratch_bytes);
    o.prep_epoch = epoch;
  }
  const bool after_pass = out->count > 0;
  return head_gemm::prepare<HeadCfg, HeadQkvEpilogue>(kOp, o, plan.grid, ep, /*after_pdl_producer=*/after_pass,
                                                      out->add());
}

}  // namespace gk::audio
