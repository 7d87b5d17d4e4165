// Launch of the attention kernels as the plan says (attention_plan.hpp): the instantiated matrix is head_dim 128 x
// {softcap on, off} x {causal, additive, none} for the sm80-class kernel and the sm90 kernel, and the sm90 kernel's
// fixed-reference softmax for softcap x {causal, additive, none}. Additive mode first builds the tile lists for the
// kernel's block shape (mask_tiles.cu).
#include <cuda.h>

#include <algorithm>

#include "attention/attention.hpp"
#include "attention/attention_plan.hpp"
#include "attention/attention_sm80.cuh"
#include "attention/attention_sm90.cuh"
#include "attention/tail_packing.hpp"
#include "common/cluster_launch.hpp"
#include "common/cuda_check.hpp"
#include "common/tensor_map.hpp"

namespace gk::gemma3 {

namespace {

constexpr const char* kOp = "gemma3_attention";
using Sm80Traits128 = AttentionTraits</*kBlockM=*/64, /*kBlockN=*/64, /*kHeadDim=*/128, /*kWarps=*/4>;
static_assert(Sm90Traits::kBlockM == kSm90Block && Sm90Traits::kBlockN == kSm90Block &&
                  Sm80Traits128::kBlockM == kSm80Block && Sm80Traits128::kBlockN == kSm80Block,
              "the planner's tiles (attention_plan.hpp) are the kernels'");

// The grid of the plan: the tile count into the parameters (the kernels decode tiles from it).
void apply_grid(const AttentionPlan& plan, AttentionParams* p) {
  p->num_m_blocks = (p->seq_len + plan.block_m - 1) / plan.block_m;
  p->num_tiles = static_cast<int>(plan.tiles);
  p->tail_rows = plan.tail_rows;
  p->tail_inv = tail_reciprocal(plan.tail_rows);
  p->fixed_bias = plan.fixed_bias;
}

template <class Tr, bool kSoftcap, MaskMode kMask>
Status launch_sm80(AttentionParams p, const AttentionPlan& plan, bool programmatic, cudaStream_t stream) {
  apply_grid(plan, &p);
  if (kMask == MaskMode::kAdditive) {
    GK_RETURN_IF_ERROR(build_mask_tiles(&p, Tr::kBlockM, Tr::kBlockN, programmatic, stream));
  }
  return detail::launch_z_clusters(kOp, "attention sm80 kernel launch", attention_fwd_kernel<Tr, kSoftcap, kMask>,
                                   dim3(static_cast<unsigned>(plan.grid)), Tr::kThreads, Tr::kSmemBytes,
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

template <bool kSoftcap, MaskMode kMask>
Status launch_sm90(AttentionParams p, const AttentionPlan& plan, bool programmatic, cudaStream_t stream) {
  using Tr = Sm90Traits;
  apply_grid(plan, &p);
  const Sm90Columns cols{static_cast<int>(p.k - p.q), static_cast<int>(p.v - p.q), plan.o_tma};
  CUtensorMap map, tail_map, out_map{};
  GK_RETURN_IF_ERROR(encode_qkv_map(p, Tr::kBoxRows, &map));
  if (cols.o_tma) {
    // The output as [B][S][Hq * D] in boxes of 64 columns x 64 rows (one consumer warpgroup's half tile).
    const uint64_t dims[3] = {uint64_t(p.num_q_heads) * Tr::kHeadDim, uint64_t(p.seq_len), uint64_t(p.batch)};
    const uint64_t strides[2] = {uint64_t(p.o_token_stride) * 2, uint64_t(p.o_batch_stride) * 2};
    const uint32_t box[3] = {64, 64, 1};
    GK_RETURN_IF_ERROR(
        detail::encode_tiled_map(kOp, &out_map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, p.o, dims, strides, box));
  }
  tail_map = map;
  if (p.tail_rows > 0) GK_RETURN_IF_ERROR(encode_qkv_map(p, static_cast<uint32_t>(p.tail_rows), &tail_map));
  auto kernel = attention_sm90_kernel<kSoftcap, kMask, false>;
  if constexpr (kSoftcap) {
    if (plan.fixed_softmax) kernel = attention_sm90_kernel<kSoftcap, kMask, true>;
  }
  if (kMask == MaskMode::kAdditive) {
    // Only the fixed form reads the bounded-block flag, so only its lists carry it (docs/perf-log.md v21).
    GK_RETURN_IF_ERROR(
        build_mask_tiles(&p, Tr::kBlockM, Tr::kBlockN, programmatic, stream, /*mark_bounded=*/plan.fixed_softmax));
  }
  return detail::launch_z_clusters(kOp, "attention sm90 kernel launch", kernel, dim3(static_cast<unsigned>(plan.grid)),
                                   Tr::kThreads, Tr::kSmemBytes, /*cluster=*/false, programmatic, stream, map, tail_map,
                                   out_map, p, cols);
}

template <bool kSoftcap, MaskMode kMask>
Status launch_variant(const AttentionParams& p, const AttentionPlan& plan, bool programmatic, cudaStream_t stream) {
  if (plan.kernel == AttentionKernel::kSm90) return launch_sm90<kSoftcap, kMask>(p, plan, programmatic, stream);
  return launch_sm80<Sm80Traits128, kSoftcap, kMask>(p, plan, programmatic, stream);
}

template <bool kSoftcap>
Status launch_mask(const AttentionParams& p, const AttentionPlan& plan, bool programmatic, cudaStream_t stream) {
  switch (p.mask_mode) {
    case MaskMode::kCausal:
      return launch_variant<kSoftcap, MaskMode::kCausal>(p, plan, programmatic, stream);
    case MaskMode::kAdditive:
      return launch_variant<kSoftcap, MaskMode::kAdditive>(p, plan, programmatic, stream);
    case MaskMode::kNone:
      return launch_variant<kSoftcap, MaskMode::kNone>(p, plan, programmatic, stream);
  }
  return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: unknown mask mode %d", kOp, static_cast<int>(p.mask_mode));
}

}  // namespace

Status launch_attention(AttentionParams p, int head_dim, const AttentionPlan& plan, bool programmatic,
                        cudaStream_t stream) {
  if (head_dim != Sm90Traits::kHeadDim || head_dim != Sm80Traits128::kHeadDim) {
    return detail::error(GK_STATUS_NOT_SUPPORTED, "%s: no attention kernel for head_dim %d", kOp, head_dim);
  }
  // A column pair of the mask loads as one 4-byte word when no pair can straddle a row end or a word boundary.
  p.mask_pairs = p.mask_mode == MaskMode::kAdditive && p.seq_len % 2 == 0 && p.mask_row_stride % 2 == 0 &&
                 p.mask_batch_stride % 2 == 0 && reinterpret_cast<uintptr_t>(p.mask) % 4 == 0;
  return p.softcap ? launch_mask<true>(p, plan, programmatic, stream)
                   : launch_mask<false>(p, plan, programmatic, stream);
}

}  // namespace gk::gemma3
