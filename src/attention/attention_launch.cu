// Variant selection and launch of the attention kernels. The supported matrix is instantiated explicitly here:
// head_dim 128 x {softcap on, off} x {causal, additive, none}, for the sm_80-class kernel and the Hopper kernel, and
// the Hopper kernel's fixed-reference softmax for softcap x {causal, additive, none}.
// Additive mode first builds the tile lists for the chosen kernel's block shape (mask_tiles.cu).
#include <cuda.h>

#include <algorithm>

#include "common/cluster_launch.hpp"
#include "common/cuda_check.hpp"
#include "common/device_props.hpp"
#include "common/env_choice.hpp"
#include "common/tensor_map.hpp"
#include "attention/attention_sm80.cuh"
#include "attention/attention_sm90.cuh"
#include "attention/fixed_softmax.hpp"
#include "attention/attention.hpp"
#include "attention/tail_packing.hpp"

namespace gk::gemma3 {

namespace {

constexpr const char* kOp = "gemma3_attention";
using Traits128 = AttentionTraits</*kBlockM=*/64, /*kBlockN=*/64, /*kHeadDim=*/128, /*kWarps=*/4>;

// Kernel choice, from `gk bench` per-kernel timings on the H200 (docs/perf-log.md, v3): the Hopper kernel's grid
// of 128-row tiles is too small to fill the GPU when it has fewer tiles than half the SMs (B = 1, S = 128: 24
// tiles, 7.0 us against 6.1 us for the 64-row kernel); the 64-row kernel takes those. The Hopper kernel's grid
// is persistent at every length (one CTA per SM walking tiles in a snake order: attention_scheduler.cuh); one
// CTA per tile was the choice from S = 2048 on until the packed tails and the producer's tile decoding (v8).

enum class Choice { kAuto, kMma, kWgmma, kInvalid };

// GK_ATTENTION_KERNEL=mma|wgmma overrides the choice (tests and benchmarks use it to pin one kernel).
Choice forced_choice() {
  static const Choice c = [] {
    switch (detail::env_choice("GK_ATTENTION_KERNEL", {"mma", "wgmma"})) {
      case 0:
        return Choice::kMma;
      case 1:
        return Choice::kWgmma;
      case detail::kEnvInvalid:
        return Choice::kInvalid;
      default:
        return Choice::kAuto;
    }
  }();
  return c;
}

// GK_ATTENTION_TAIL=packed|separate pins whether the Hopper kernel packs the GQA tails (tests run both).
int forced_tail() {
  static const int c = detail::env_choice("GK_ATTENTION_TAIL", {"packed", "separate"});
  return c;
}

// GK_ATTENTION_STORE=tma|direct pins how the Hopper kernel's output tiles leave shared memory (tests run both).
int forced_store() {
  static const int c = detail::env_choice("GK_ATTENTION_STORE", {"tma", "direct"});
  return c;
}

// GK_ATTENTION_SOFTMAX=online|fixed pins the Hopper kernel's softmax where the fixed reference applies (softcap;
// in additive mode the blocks the tile lists find bounded; fixed_softmax.hpp): the running row maximum, or the
// fixed reference (the default there).
int forced_softmax() {
  static const int c = detail::env_choice("GK_ATTENTION_SOFTMAX", {"online", "fixed"});
  return c;
}

// The launch steps both kernels share: the tile count and a grid of one CTA per tile (the Hopper kernel's launch
// then caps it at one CTA per SM). The shared-memory opt-in comes with the launch (detail::launch_z_clusters).
Status prepare_grid(int block_m, AttentionParams* p, unsigned* blocks) {
  p->num_m_blocks = (p->seq_len + block_m - 1) / block_m;
  const int64_t n = tile_count(*p, block_m);
  // A persistent grid's last round may index up to num_tiles + its grid (at most one CTA per SM).
  constexpr int64_t kMaxTiles = INT32_MAX - 65536;
  if (n > kMaxTiles) {
    return detail::error(GK_STATUS_INVALID_ARGUMENT, "%s: %lld work tiles of %d query rows exceed the limit %lld", kOp,
                         static_cast<long long>(n), block_m, static_cast<long long>(kMaxTiles));
  }
  p->num_tiles = static_cast<int>(n);
  *blocks = static_cast<unsigned>(n);
  return Status::Ok();
}

template <class Tr, bool kSoftcap, MaskMode kMask>
Status launch_mma(AttentionParams p, bool programmatic, cudaStream_t stream) {
  auto kernel = attention_fwd_kernel<Tr, kSoftcap, kMask>;
  p.tail_rows = p.tail_inv = 0;  // the Hopper kernel's packing only
  unsigned blocks = 0;
  GK_RETURN_IF_ERROR(prepare_grid(Tr::kBlockM, &p, &blocks));
  if (kMask == MaskMode::kAdditive) {
    GK_RETURN_IF_ERROR(build_mask_tiles(&p, Tr::kBlockM, Tr::kBlockN, programmatic, stream));
  }
  return detail::launch_z_clusters(kOp, "attention kernel launch", kernel, dim3(blocks), Tr::kThreads, Tr::kSmemBytes,
                                   /*cluster=*/false, programmatic, stream, p);
}

// The packed q|k|v buffer as a 3-D tensor [B][S][width] (bf16) in 64-column x `box_rows`-row boxes with the
// 128-byte swizzle; rows past S of a batch read as zeros.
Status encode_qkv_map(const AttentionParams& p, uint32_t box_rows, CUtensorMap* map) {
  const uint64_t dims[3] = {uint64_t(p.q_token_stride), uint64_t(p.seq_len), uint64_t(p.batch)};
  const uint64_t strides[2] = {uint64_t(p.q_token_stride) * 2, uint64_t(p.q_batch_stride) * 2};
  const uint32_t box[3] = {Sm90Traits::kBoxCols, box_rows, 1};
  return detail::encode_tiled_map(kOp, map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, p.q, dims, strides, box);
}

// The Hopper kernel reads q, k and v through one tensor map: they must be column ranges of one packed buffer.
// Its output leaves by TMA stores or in 16-byte pieces: 16-byte aligned rows either way.
bool sm90_layout(const AttentionParams& p, Sm90Columns* cols) {
  const int64_t k_col = p.k - p.q, v_col = p.v - p.q, width = p.q_token_stride;
  // q's heads from column 0, k's and v's (in either order) after them, apart, within the row.
  const int64_t q_span = int64_t(p.num_q_heads) * 128, kv_span = int64_t(p.num_q_heads / p.group_size) * 128;
  const bool columns = k_col >= q_span && v_col >= q_span && k_col + kv_span <= width && v_col + kv_span <= width &&
                       (k_col + kv_span <= v_col || v_col + kv_span <= k_col);
  const bool packed = p.k_token_stride == width && p.v_token_stride == width && p.q_head_stride == 128 &&
                      p.k_head_stride == 128 && p.v_head_stride == 128 && p.q_batch_stride == p.seq_len * width &&
                      p.k_batch_stride == p.q_batch_stride && p.v_batch_stride == p.q_batch_stride && columns &&
                      width % 8 == 0 &&
                      reinterpret_cast<uintptr_t>(p.q) % 16 == 0 &&
                      // the output rows: 16-byte aligned
                      reinterpret_cast<uintptr_t>(p.o) % 16 == 0 && p.o_token_stride % 8 == 0 &&
                      p.o_head_stride % 8 == 0 && p.o_batch_stride % 8 == 0;
  cols->k_col = static_cast<int>(k_col);
  cols->v_col = static_cast<int>(v_col);
  // TMA stores of whole 64 x 64 boxes: heads of 128 contiguous elements, 16-byte aligned rows.
  cols->o_tma = p.o_head_stride == 128 && p.o_token_stride >= int64_t(p.num_q_heads) * 128;
  return packed;
}

template <bool kSoftcap, MaskMode kMask>
Status launch_wgmma(AttentionParams p, Sm90Columns cols, bool programmatic, cudaStream_t stream) {
  using Tr = Sm90Traits;
  const int tail = forced_tail();
  if (tail == detail::kEnvInvalid) return detail::env_error(kOp, "GK_ATTENTION_TAIL", "packed|separate");
  // Packing turns group_size tiles that each sweep every key tile into one (B = 4, S = 2053: 5 rows per head).
  p.tail_rows = tail == 1 ? 0 : packed_tail_rows(p.seq_len, p.group_size, Tr::kBlockM);
  p.tail_inv = tail_reciprocal(p.tail_rows);
  const int store = forced_store();
  if (store == detail::kEnvInvalid) return detail::env_error(kOp, "GK_ATTENTION_STORE", "tma|direct");
  if (store == 1) cols.o_tma = false;
  CUtensorMap map, tail_map, out_map{};
  GK_RETURN_IF_ERROR(encode_qkv_map(p, Tr::kBoxRows, &map));
  if (cols.o_tma) {
    // The output as [B][S][Hq * 128] in boxes of 64 columns x 64 rows (one consumer warpgroup's half tile).
    const uint64_t dims[3] = {uint64_t(p.num_q_heads) * 128, uint64_t(p.seq_len), uint64_t(p.batch)};
    const uint64_t strides[2] = {uint64_t(p.o_token_stride) * 2, uint64_t(p.o_batch_stride) * 2};
    const uint32_t box[3] = {64, 64, 1};
    GK_RETURN_IF_ERROR(
        detail::encode_tiled_map(kOp, &out_map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, p.o, dims, strides, box));
  }
  tail_map = map;
  if (p.tail_rows > 0) GK_RETURN_IF_ERROR(encode_qkv_map(p, static_cast<uint32_t>(p.tail_rows), &tail_map));
  const int softmax = forced_softmax();
  if (softmax == detail::kEnvInvalid) return detail::env_error(kOp, "GK_ATTENTION_SOFTMAX", "online|fixed");
  auto kernel = attention_sm90_kernel<kSoftcap, kMask, false>;
  bool fixed = false;
  if constexpr (kSoftcap) {
    // Against the running maximum: 1-7% faster attention on every 047 workload, then up to 9% more in its one-pass
    // form (paired runs, docs/perf-log.md v20). In additive mode the kernel then carries both forms (a block takes
    // the fixed one where its tile list is bounded): 5-8% faster from S = 2053 but 3-30% slower up to S = 1024
    // (v20.5), so unpinned it runs from kAdditiveFixedMinS.
    constexpr int kAdditiveFixedMinS = 2048;
    const bool wanted = kMask != MaskMode::kAdditive ? softmax != 0
                                                     : softmax == 1 || (softmax == detail::kEnvUnset &&
                                                                        p.seq_len >= kAdditiveFixedMinS);
    if (wanted && fixed_softmax_bias(p.softcap_out, &p.fixed_bias)) {
      kernel = attention_sm90_kernel<kSoftcap, kMask, true>;
      fixed = true;
    }
  }
  unsigned blocks = 0;
  GK_RETURN_IF_ERROR(prepare_grid(Tr::kBlockM, &p, &blocks));
  if (kMask == MaskMode::kAdditive) {
    // Only the fixed form reads the bounded flag; the kernel without it, unchanged, measured 1-2% faster at
    // S <= 1024 than with the flag's masking compiled in (docs/perf-log.md v21).
    GK_RETURN_IF_ERROR(build_mask_tiles(&p, Tr::kBlockM, Tr::kBlockN, programmatic, stream, /*mark_bounded=*/fixed));
  }
  int sms = 0;
  GK_RETURN_IF_ERROR(detail::sm_count(kOp, &sms));
  blocks = std::min(blocks, static_cast<unsigned>(sms));
  return detail::launch_z_clusters(kOp, "attention sm90 kernel launch", kernel, dim3(blocks), Tr::kThreads,
                                   Tr::kSmemBytes, /*cluster=*/false, programmatic, stream, map, tail_map, out_map, p,
                                   cols);
}

template <bool kSoftcap, MaskMode kMask>
Status launch_variant(const AttentionParams& p, bool programmatic, cudaStream_t stream) {
  Sm90Columns cols{};
  const Choice forced = forced_choice();
  if (forced == Choice::kInvalid) return detail::env_error(kOp, "GK_ATTENTION_KERNEL", "mma|wgmma");
  bool wide_grid = true;
  if (forced == Choice::kAuto) {
    int sms = 0;
    GK_RETURN_IF_ERROR(detail::sm_count(kOp, &sms));
    wide_grid = 2 * tile_count(p, Sm90Traits::kBlockM) >= sms;
  }
  const bool sm90 = sm90_layout(p, &cols) && forced != Choice::kMma && wide_grid;
  if (sm90) return launch_wgmma<kSoftcap, kMask>(p, cols, programmatic, stream);
  return launch_mma<Traits128, kSoftcap, kMask>(p, programmatic, stream);
}

template <bool kSoftcap>
Status launch_mask(const AttentionParams& p, bool programmatic, cudaStream_t stream) {
  switch (p.mask_mode) {
    case MaskMode::kCausal:
      return launch_variant<kSoftcap, MaskMode::kCausal>(p, programmatic, stream);
    case MaskMode::kAdditive:
      return launch_variant<kSoftcap, MaskMode::kAdditive>(p, programmatic, stream);
    case MaskMode::kNone:
      return launch_variant<kSoftcap, MaskMode::kNone>(p, programmatic, stream);
  }
  return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: unknown mask mode %d", kOp, static_cast<int>(p.mask_mode));
}

}  // namespace

Status launch_attention(AttentionParams p, int head_dim, bool programmatic, cudaStream_t stream) {
  if (head_dim != Traits128::kHeadDim) {
    return detail::error(GK_STATUS_NOT_SUPPORTED, "%s: no attention kernel for head_dim %d", kOp, head_dim);
  }
  // A column pair of the mask loads as one 4-byte word when no pair can straddle a row end or a word boundary.
  p.mask_pairs = p.mask_mode == MaskMode::kAdditive && p.seq_len % 2 == 0 && p.mask_row_stride % 2 == 0 &&
                 p.mask_batch_stride % 2 == 0 && reinterpret_cast<uintptr_t>(p.mask) % 4 == 0;
  return p.softcap ? launch_mask<true>(p, programmatic, stream) : launch_mask<false>(p, programmatic, stream);
}

}  // namespace gk::gemma3
