// Launch and path choice of the fused audio QKV kernels: the split kernels (tf32, and 3xTF32 for the exact mode),
// whose K split (a cluster of CTAs along z) is chosen from the grid the row tiles alone would give, so small M
// still spreads the weight stream over most SMs; and the persistent head-tiled GEMM (projection/head_gemm) for tf32
// past one wave.
#include <cuda_runtime.h>

#include <initializer_list>
#include <type_traits>

#include "audio_qkv/launchers.hpp"
#include "audio_qkv/qkv_head_epilogue.cuh"
#include "audio_qkv/qkv_tf32x3_splitk_sm90.cuh"
#include "audio_qkv/qkv_tf32_splitk_sm90.cuh"
#include "common/cluster_launch.hpp"
#include "common/cuda_check.hpp"
#include "common/device_props.hpp"
#include "common/env_choice.hpp"
#include "projection/head_gemm/head_gemm_launch.cuh"
#include "common/tensor_map.hpp"

namespace gk::audio {

namespace {

constexpr const char* kOp = "audio_qkv";
constexpr int64_t kMaxRowTiles = 65535;  // grid.y

// What the kernel's grid and tiling can take: hidden a whole number of K-blocks, row tiles within grid.y, the
// three projections' heads within grid.x, and sizes that fit the parameter block's ints.
bool supported(int64_t rows, int64_t hidden, int64_t heads) {
  using Tr = QkvGemmTraits;
  return rows <= kMaxRowTiles * Tr::kBM && hidden % Tr::kBK == 0 && hidden <= INT32_MAX &&
         3 * heads <= INT32_MAX;
}

struct Maps {
  CUtensorMap hs, hs_raw, wq, wk, wv;
};

// hs [hs_rows, K] (M, or 2M for the split activations; the prepared copy where there is one), hs_raw the caller's
// [M, K] and each weight [H*128, K] as 32-column x 128-row fp32 boxes; rows past the end read as zeros.
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

// GK_AUDIO_SPLIT_V=smem|registers: how the split kernel's v CTAs round their weights (launch_fused).
enum { kSplitVSmem = 0, kSplitVRegisters = 1 };  // the choices' indices
int split_v_choice() {
  static const int forced = detail::env_choice("GK_AUDIO_SPLIT_V", {"smem", "registers"});
  return forced;
}

// The tf32 kernel and the 3xTF32 one share the grid (one head of q, k or v per 128 rows), the tensor maps and the
// K split; they differ in threads, shared memory and how long a K-block takes.
// `hs_raw`: the caller's activations (params.hidden may point at a prepared copy).
template <class Tr, template <bool> class Kernel>
Status launch_fused(const QkvGemmParams& params, const float* hs_raw, std::initializer_list<int> splits,
                    bool programmatic, cudaStream_t stream) {
  // supported() and the tensor maps are written for QkvGemmTraits' tile and TMA box.
  static_assert(Tr::kBM == QkvGemmTraits::kBM && Tr::kBN == QkvGemmTraits::kBN && Tr::kBK == QkvGemmTraits::kBK,
                "one tile shape for both kernels");
  QkvGemmParams p = params;
  if (!supported(p.m, p.k_dim, p.heads)) {
    return detail::error(GK_STATUS_INVALID_ARGUMENT, "%s: M = %d, hidden %d, %d heads are outside the fused kernel's grid",
                         kOp, p.m, p.k_dim, p.heads);
  }
  const int64_t m_tiles = (int64_t(p.m) + Tr::kBM - 1) / Tr::kBM;
  const int64_t n_tiles = int64_t(3) * p.heads;
  const int k_blocks = p.k_dim / Tr::kBK;
  // Each CTA of a split takes an equal share of the K-blocks (the kernel takes one count for all).
  int split = 1;
  GK_RETURN_IF_ERROR(detail::choose_cluster_split(
      kOp, reinterpret_cast<const void*>(Kernel<true>::get()), Tr::kThreads, Tr::kSmemBytes, m_tiles * n_tiles,
      k_blocks, splits, /*even_k=*/true, &split));
  if (split != 1 && split != 2 && split != 4) {  // the epilogue's cluster reduction takes 2 or 4
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: K split %d outside the fused kernel's support", kOp, split);
  }
  p.k_blocks = k_blocks / split;
  // tf32: where q's and k's CTAs read truncated and the activations arrive rounded, v's CTAs can round their
  // weights in registers (the K-blocks in pairs) and the kernel runs without rounding groups (qkv_tf32_splitk_sm90.cuh).
  // That measured faster with a K split (M = 128-256: 0.7-1.2 us) and 0.1-0.25 us slower without one (M = 512-586,
  // where v's CTAs are not the slowest; docs/perf-log.md v19), so it is the default with a split only.
  // GK_AUDIO_SPLIT_V=smem|registers pins in place (the rounding groups) or in registers wherever it can run.
  // The split choice above asked about the form with rounding groups; the form without them is held to one CTA
  // per SM by the same shared memory, so the answer holds for both.
  bool no_rounding = false;
  if constexpr (std::is_same_v<Tr, QkvGemmTraits>) {
    const int forced = split_v_choice();  // validated by launch_qkv_gemm_tf32 before anything was enqueued
    const bool wanted = forced == detail::kEnvUnset ? split > 1 : forced == kSplitVRegisters;
    no_rounding = wanted && p.a_prepared && p.qk_truncated && p.k_blocks % 2 == 0;
  }
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(m_tiles), static_cast<unsigned>(split));
  Maps maps;
  // Split activations: the big parts' M rows, then the small parts' (rows past M of the last row tile then read
  // small parts rather than zeros; their rows are independent of the stored ones and never stored).
  GK_RETURN_IF_ERROR(encode_maps(p, hs_raw, uint64_t(p.m) * (p.a_prepared ? Tr::kAParts : 1), &maps));
  const auto go = [&](auto kernel, bool cluster, int threads) {
    const auto launch = [&](const auto&... maps_in_order) {
      return detail::launch_z_clusters(kOp, "fused QKV kernel launch", kernel, grid, threads, Tr::kSmemBytes,
                                       cluster, programmatic, stream, maps_in_order..., p);
    };
    if constexpr (Kernel<true>::kReadsRawActivations) return launch(maps.hs, maps.hs_raw, maps.wq, maps.wk, maps.wv);
    else return launch(maps.hs, maps.wq, maps.wk, maps.wv);
  };
  if constexpr (std::is_same_v<Tr, QkvGemmTraits>) {
    if (no_rounding) {
      constexpr int kThreads = QkvGemmTraits::kThreadsNoRounding;
      return split > 1 ? go(audio_qkv_gemm_kernel<true, false>, true, kThreads)
                       : go(audio_qkv_gemm_kernel<false, false>, false, kThreads);
    }
  }
  return split > 1 ? go(Kernel<true>::get(), true, Tr::kThreads) : go(Kernel<false>::get(), false, Tr::kThreads);
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
struct ThreeTf32Kernel : RawActivations<false> {
  static auto get() { return audio_qkv_3xtf32_kernel<kSplit>; }
};

// The persistent kernel reads v's weights from a rounded copy (which its idle producer warps may write themselves:
// weight_prep.cuh): rounding each stage's weight tile in the ring instead measured far slower (054 mean 130.0
// against 88.6 us, docs/perf-log.md v7).
using HeadCfg = head_gemm::Tf32Config;

// The shape alone, for the path choice: the operator's contract already guarantees 16-byte aligned tensors.
head_gemm::Operands shape_operands(int64_t rows, int64_t hidden, int64_t heads) {
  head_gemm::Operands o;
  o.m = rows;
  o.k = hidden;
  o.segments = 3;
  for (int s = 0; s < 3; ++s) o.heads[s] = heads;
  return o;
}

head_gemm::Operands head_operands(const QkvGemmParams& p, const float* const (&w)[3]) {
  head_gemm::Operands o = shape_operands(p.m, p.k_dim, p.heads);
  o.a = p.hidden;
  for (int s = 0; s < 3; ++s) o.w[s] = w[s];
  return o;
}

}  // namespace

Status qkv_gemm_tf32_chosen(int64_t rows, int64_t hidden, int64_t heads, Tf32Path* path) {
  using Tr = QkvGemmTraits;
  *path = Tf32Path::kCublas;
  // GK_AUDIO_TF32_PATH pins the path (tests run every shape through each; benchmarks compare).
  enum { kFused = 0, kCublas = 1, kSplitOnly = 2, kPersistentOnly = 3 };  // the choices' indices
  static const int forced = detail::env_choice("GK_AUDIO_TF32_PATH", {"fused", "cublas", "split", "persistent"});
  if (forced == detail::kEnvInvalid) {
    return detail::env_error(kOp, "GK_AUDIO_TF32_PATH", "fused|cublas|split|persistent");
  }
  if (forced == kCublas) return Status::Ok();
  const head_gemm::Operands shape = shape_operands(rows, hidden, heads);
  const bool split_ok = supported(rows, hidden, heads), persistent_ok = head_gemm::shape_supported<HeadCfg>(shape);
  if (forced == kSplitOnly) {
    if (split_ok) *path = Tf32Path::kSplit;
    return Status::Ok();
  }
  if (forced == kPersistentOnly) {
    if (persistent_ok) *path = Tf32Path::kPersistent;
    return Status::Ok();
  }
  int sms = 0;
  GK_RETURN_IF_ERROR(detail::sm_count(kOp, &sms));
  if (split_ok && (rows + Tr::kBM - 1) / Tr::kBM * 3 * heads <= sms) {
    *path = Tf32Path::kSplit;
    return Status::Ok();
  }
  if (!persistent_ok) return Status::Ok();
  if (forced == kFused) {
    *path = Tf32Path::kPersistent;
    return Status::Ok();
  }
  // Past one wave the persistent kernel beats cuBLASLt + the norm kernel on every suite shape, since it rounds
  // only v's weights also at M = 2048 (96 units on 66 clusters, fill 0.73: 54.2 against 57.0-57.7 us;
  // docs/perf-log.md v13; v7 had it 60.9 against 57.7). Its time goes by rounds of clusters and cuBLASLt's by
  // rows, so at two rounds they cross near a fill of 0.7; below it cuBLASLt's smaller tiles fill the machine
  // better.
  int clusters = 0;
  GK_RETURN_IF_ERROR((head_gemm::resident_clusters<HeadCfg, HeadQkvEpilogue>(kOp, &clusters)));
  int64_t rounds = 0;
  double fill = 0.0;
  head_gemm::unit_rounds(head_gemm::units_of<HeadCfg>(shape), clusters, &rounds, &fill);
  *path = clusters < 1 || (rounds >= 2 && fill < 0.7) ? Tf32Path::kCublas : Tf32Path::kPersistent;
  return Status::Ok();
}

Status launch_qkv_head_gemm_tf32(const QkvGemmParams& p, float* rounded_wv, void* sk_scratch, size_t sk_scratch_bytes,
                                 uint64_t epoch, cudaStream_t stream) {
  // Stream-K takes a mostly idle last round's clusters back (docs/perf-log.md v13); GK_AUDIO_STREAM_K=off deals
  // whole units round-robin throughout, =any-fill takes stream-K whatever the last round's fill (comparisons).
  enum { kOn = 0, kOff = 1, kAnyFill = 2 };  // the choices' indices
  static const int forced = detail::env_choice("GK_AUDIO_STREAM_K", {"on", "off", "any-fill"});
  if (forced == detail::kEnvInvalid) return detail::env_error(kOp, "GK_AUDIO_STREAM_K", "on|off|any-fill");
  // v's weights are rounded by the GEMM's idle producer warps during its first round where that pays
  // (head_gemm/weight_prep.cuh, prep_pays), else by a pass before it (the GEMM then starts as its programmatic
  // dependent). The first hands the slices over under the call's epoch, which a replayed CUDA graph repeats, so
  // under stream capture the pass runs. GK_AUDIO_V_ROUND pins the first everywhere (=fused; still the pass under
  // capture), the second (=pass), or the first everywhere with every CTA taking its fallback, rounding all of them
  // itself (=fused-fallback: tests only).
  enum { kFusedRound = 0, kPass = 1, kFallback = 2 };  // the choices' indices
  static const int v_round = detail::env_choice("GK_AUDIO_V_ROUND", {"fused", "pass", "fused-fallback"});
  if (v_round == detail::kEnvInvalid) return detail::env_error(kOp, "GK_AUDIO_V_ROUND", "fused|pass|fused-fallback");
  HeadQkvEpilogue::Params ep{};
  ep.out[0] = p.q;
  ep.out[1] = p.k;
  ep.out[2] = p.v;
  ep.norm[0] = p.q_norm;
  ep.norm[1] = p.k_norm;
  ep.norm[2] = nullptr;
  ep.out_row_stride = int64_t(p.heads) * 128;
  ep.eps = p.eps;
  // q and k read truncated (their norm removes truncation's bias: qkv_tf32_splitk_sm90.cuh), so only v's weights are
  // rounded, a third of the pass, and only v's tiles round their A fragments.
  const float* const w[3] = {p.wq, p.wk, rounded_wv};
  head_gemm::Operands o = head_operands(p, w);
  o.round_a_segments = 1u << 2;
  if (forced != kOff) {
    o.sk_scratch = sk_scratch;
    o.sk_scratch_bytes = sk_scratch_bytes;
    o.sk_epoch = epoch;
    o.sk_any_fill = forced == kAnyFill;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  GK_RETURN_IF_ERROR(detail::cuda_status(cudaStreamIsCapturing(stream, &capture), kOp, "cudaStreamIsCapturing"));
  unsigned long long* slots = head_gemm::prep_slots_in(sk_scratch, sk_scratch_bytes);
  bool pays = false;
  GK_RETURN_IF_ERROR((head_gemm::prep_pays<HeadCfg, HeadQkvEpilogue>(kOp, o, &pays)));
  o.lag_last_segment = pays;  // by the shape alone: the same bits whichever way v's weights get rounded
  const bool in_kernel = (v_round == detail::kEnvUnset ? pays : v_round != kPass) &&
                         capture == cudaStreamCaptureStatusNone && slots != nullptr;
  if (!in_kernel) {
    GK_RETURN_IF_ERROR(launch_round_tf32(&p.wv, 1, rounded_wv, int64_t(p.heads) * 128 * p.k_dim, stream));
  } else {
    o.prep_seg = 2;
    o.prep_src = p.wv;
    o.prep_slots = slots;
    o.prep_epoch = epoch;
    if (v_round == kFallback) o.prep_wait_ns = 0;
  }
  return head_gemm::launch<HeadCfg, HeadQkvEpilogue>(kOp, o, ep, stream, /*after_pdl_producer=*/!in_kernel);
}

namespace {

// The fused kernel with its activations first prepared into `scratch` by `prepare(hidden, scratch, M * K)`
// (Tr::kAParts x M x K floats; the kernel then launches as the pass's programmatic dependent and prepares only the
// weight tile), or, when `in_smem` or they do not fit, both operands prepared in shared memory.
template <class Tr, template <bool> class Kernel, class Prepare>
Status launch_fused_prepared(const QkvGemmParams& params, bool in_smem, float* scratch, int64_t scratch_floats,
                             const Prepare& prepare, cudaStream_t stream) {
  const int64_t a_floats = int64_t(params.m) * params.k_dim;
  if (in_smem || Tr::kAParts * a_floats > scratch_floats) {
    return launch_fused<Tr, Kernel>(params, params.hidden, {4, 2}, /*programmatic=*/false, stream);
  }
  GK_RETURN_IF_ERROR(prepare(params.hidden, scratch, a_floats));
  QkvGemmParams p = params;
  p.hidden = scratch;
  p.a_prepared = 1;
  return launch_fused<Tr, Kernel>(p, params.hidden, {4, 2}, /*programmatic=*/true, stream);
}

}  // namespace

Status launch_qkv_gemm_tf32(const QkvGemmParams& params, float* scratch, int64_t scratch_floats, cudaStream_t stream) {
  // The rounding groups pace the split kernel; with the activations rounded beforehand they round only the weight
  // tile, half of each stage's shared-memory round trip: 1.0-3.1 us faster at M = 256..586, equal at M = 128
  // (docs/perf-log.md v10.5).
  enum { kSmem = 0, kPrerounded = 1 };  // the choices' indices
  static const int forced = detail::env_choice("GK_AUDIO_SPLIT_A", {"smem", "prerounded"});
  if (forced == detail::kEnvInvalid) return detail::env_error(kOp, "GK_AUDIO_SPLIT_A", "smem|prerounded");
  if (split_v_choice() == detail::kEnvInvalid) return detail::env_error(kOp, "GK_AUDIO_SPLIT_V", "smem|registers");
  const auto round = [&](const float* a, float* dst, int64_t n) { return launch_round_tf32(&a, 1, dst, n, stream); };
  QkvGemmParams p = params;
  p.qk_truncated = 1;  // the pass's rounded activations then serve v's CTAs only
  return launch_fused_prepared<QkvGemmTraits, Tf32Kernel>(p, forced == kSmem, scratch, scratch_floats, round,
                                                          stream);
}

int64_t tf32_scratch_floats(int64_t rows, int64_t hidden, int64_t heads) {
  const int64_t w_floats = heads * 128 * hidden, a_floats = rows * hidden;
  return a_floats <= 3 * w_floats && a_floats > w_floats ? a_floats : w_floats;
}

Status qkv_gemm_exact_chosen(int64_t rows, int64_t hidden, int64_t heads, bool* fused) {
  *fused = false;
  if (!supported(rows, hidden, heads)) return Status::Ok();
  // GK_AUDIO_EXACT_PATH=fused|cublas pins the path (tests run every shape through both).
  enum { kFused = 0, kCublas = 1 };  // the choices' indices
  static const int forced = detail::env_choice("GK_AUDIO_EXACT_PATH", {"fused", "cublas"});
  if (forced == detail::kEnvInvalid) return detail::env_error(kOp, "GK_AUDIO_EXACT_PATH", "fused|cublas");
  *fused = forced != kCublas;
  return Status::Ok();
}

int64_t exact_split_scratch_floats(int64_t rows, int64_t hidden, int64_t heads) {
  // At most 256 MiB (M x K up to 32 Mi floats, M = 32768 at K = 1024): beyond, the kernel splits both operands in
  // shared memory rather than the call asking for twice its input again as workspace.
  constexpr int64_t kMaxFloats = int64_t(64) << 20;
  const int64_t floats = 2 * rows * hidden;
  return supported(rows, hidden, heads) && floats <= kMaxFloats ? floats : 0;
}

Status launch_qkv_gemm_3xtf32(const QkvGemmParams& params, float* scratch, int64_t scratch_floats,
                              cudaStream_t stream) {
  // The splitter warps pace the 3xTF32 kernel; with the activations split beforehand they split only the weight
  // tile: 23% faster over the suite (docs/perf-log.md v10.6).
  enum { kPresplit = 0, kSmem = 1 };  // the choices' indices
  static const int forced = detail::env_choice("GK_AUDIO_EXACT_A", {"presplit", "smem"});
  if (forced == detail::kEnvInvalid) return detail::env_error(kOp, "GK_AUDIO_EXACT_A", "presplit|smem");
  const auto split = [&](const float* a, float* dst, int64_t n) { return launch_split_tf32(a, dst, n, stream); };
  return launch_fused_prepared<Qkv3xTf32Traits, ThreeTf32Kernel>(params, forced == kSmem, scratch, scratch_floats,
                                                                 split, stream);
}

}  // namespace gk::audio
