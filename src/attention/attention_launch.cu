// Launch of the attention kernels as the plan says (attention_plan.hpp): the instantiated matrix is {softcap on, off}
// x {causal, sliding window, additive, none} for the sm80-class kernel at head_dim 128 and 256 and the sm90 kernel
// at 128 (256: without the additive mask), the sm90 kernel's fixed-reference softmax at 128 for softcap x each
// mask, and the cached forms (a key/value cache): the sm80 kernel's without the additive mask, the sm90 kernel's
// causal and with a window. Additive mode first builds the tile lists for the
// kernel's block shape (mask_tiles.cu).
#include <cuda.h>

#include <algorithm>

#include "attention/attention.hpp"
#include "attention/attention_plan.hpp"
#include "attention/attention_sm80.cuh"
#include "attention/attention_sm90.cuh"
#include "attention/tail_packing.hpp"
#include "common/cuda_check.hpp"
#include "common/device_props.hpp"
#include "common/kernel_launch.hpp"
#include "common/tensor_map.hpp"

namespace gk::gemma3 {

namespace {

constexpr const char* kOp = "gemma3_attention";
using Sm80Traits128 = AttentionTraits</*kBlockM=*/64, /*kBlockN=*/64, /*kHeadDim=*/128, /*kWarps=*/4>;
// head_dim 256 on the sm80-class kernel: the same tiles (160 KB of shared memory).
using Sm80Traits256 = AttentionTraits</*kBlockM=*/64, /*kBlockN=*/64, /*kHeadDim=*/256, /*kWarps=*/4>;
static_assert(Sm90Traits::kBlockM == kSm90Block && Sm90Traits::kBlockN == kSm90Block &&
                  Sm90Traits256::kBlockM == kSm90Block && Sm90Traits256::kBlockN == sm90_key_tile(256, true) &&
                  Sm90Traits::kHeadDim == 128 && Sm90Traits256::kHeadDim == 256 && Sm80Traits256::kBlockM == kSm80Block &&
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
Status prepare_sm80(AttentionParams p, const AttentionPlan& plan, AttentionLaunches* out) {
  apply_grid(plan, &p);
  if (kMask == MaskMode::kAdditive) {
    GK_RETURN_IF_ERROR(prepare_mask_tiles(&p, Tr::kBlockM, Tr::kBlockN, false, &out->classify, &out->list));
  }
  const auto kernel = [&] {
    if constexpr (kMask != MaskMode::kAdditive) {
      if (p.kv_lens != nullptr) return attention_fwd_kernel<Tr, kSoftcap, kMask, true>;
    }
    return attention_fwd_kernel<Tr, kSoftcap, kMask, false>;
  }();
  out->kernel = detail::KernelLaunch("attention sm80 kernel launch", kernel,
                                     {dim3(static_cast<unsigned>(plan.grid)), Tr::kThreads, Tr::kSmemBytes}, p);
  return Status::Ok();
}

// The packed q|k|v buffer as a 3-D tensor [B][S][width] (bf16) in 64-column x `box_rows`-row boxes with the
// 128-byte swizzle; rows past S of a batch read as zeros.
Status encode_qkv_map(const AttentionParams& p, uint32_t box_rows, CUtensorMap* map) {
  const uint64_t dims[3] = {uint64_t(p.q_token_stride), uint64_t(p.seq_len), uint64_t(p.batch)};
  const uint64_t strides[2] = {uint64_t(p.q_token_stride) * 2, uint64_t(p.q_batch_stride) * 2};
  const uint32_t box[3] = {64, box_rows, 1};  // the traits' kBoxCols
  return detail::encode_tiled_map(kOp, map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, p.q, dims, strides, box);
}

// Head-major bf16 rows [B * heads][rows][D] as a 3-D tensor in 64-column x `box_rows`-row boxes with the 128-byte
// swizzle; rows past `rows` read as zeros. A key/value cache [B][Hkv][capacity][D] (rows = its capacity) and
// gemma3_attend's query [B][Hq][S][D] (rows = S). The planner checked the layout (attention_shape): rows of head_dim
// elements, heads `head_stride` apart, batches `heads` heads apart.
Status encode_head_rows_map(const __nv_bfloat16* base, int64_t rows, int64_t heads, int64_t head_stride,
                            const AttentionParams& p, int head_dim, uint32_t box_rows, CUtensorMap* map) {
  const uint64_t dims[3] = {uint64_t(head_dim), uint64_t(rows), uint64_t(p.batch) * uint64_t(heads)};
  const uint64_t strides[2] = {uint64_t(head_dim) * 2, uint64_t(head_stride) * 2};
  const uint32_t box[3] = {64, box_rows, 1};
  return detail::encode_tiled_map(kOp, map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, base, dims, strides, box);
}

// The sm90 kernel of a variant (the fixed-reference softmax only with softcap, at D = 128; the cached form only
// causal or with a window, without the fixed reference).
template <class Tr, bool kSoftcap, MaskMode kMask>
auto sm90_kernel(bool fixed_softmax, bool cached) {
  if constexpr (kMask == MaskMode::kCausal || kMask == MaskMode::kSliding) {
    if (cached) return attention_sm90_kernel<kSoftcap, kMask, false, Tr, true>;
  }
  if constexpr (kSoftcap && Tr::kHeadDim == 128) {
    if (fixed_softmax) return attention_sm90_kernel<kSoftcap, kMask, true, Tr>;
  }
  return attention_sm90_kernel<kSoftcap, kMask, false, Tr>;
}

template <class Tr, bool kSoftcap, MaskMode kMask>
Status prepare_sm90(AttentionParams p, const AttentionPlan& plan, AttentionLaunches* out) {
  static_assert(Tr::kBoxCols == 64, "encode_qkv_map's boxes");
  if (plan.fixed_softmax && Tr::kHeadDim != 128) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: the fixed-reference softmax is built at head_dim 128", kOp);
  }
  apply_grid(plan, &p);
  const bool cached = p.kv_lens != nullptr;
  // With a cache, q is the packed rows' first columns or a head-major [B][Hq][S][D] tensor, as the planner found
  // (plan.q_heads: the cached form only).
  const Sm90Columns cols{cached ? 0 : static_cast<int>(p.k - p.q), cached ? 0 : static_cast<int>(p.v - p.q),
                         plan.o_tma, plan.q_heads};
  CUtensorMap map, tail_map, out_map{}, k_cache_map{}, v_cache_map{};
  if (plan.q_heads) {
    GK_RETURN_IF_ERROR(encode_head_rows_map(p.q, p.seq_len, p.num_q_heads, p.q_head_stride, p, Tr::kHeadDim,
                                            Tr::kBoxRows, &map));
  } else {
    GK_RETURN_IF_ERROR(encode_qkv_map(p, Tr::kBoxRows, &map));
  }
  if (cached) {
    const int kv_heads = p.num_q_heads / p.group_size;
    GK_RETURN_IF_ERROR(encode_head_rows_map(p.k, p.kv_capacity, kv_heads, p.k_head_stride, p, Tr::kHeadDim,
                                            Tr::kBoxRows, &k_cache_map));
    GK_RETURN_IF_ERROR(encode_head_rows_map(p.v, p.kv_capacity, kv_heads, p.v_head_stride, p, Tr::kHeadDim,
                                            Tr::kBoxRows, &v_cache_map));
  }
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
  if (kMask == MaskMode::kAdditive) {
    // Only the fixed form reads the bounded-block flag, so only its lists carry it (docs/perf-log.md v21).
    GK_RETURN_IF_ERROR(prepare_mask_tiles(&p, Tr::kBlockM, Tr::kBlockN, /*mark_bounded=*/plan.fixed_softmax,
                                          &out->classify, &out->list));
  }
  out->kernel = detail::KernelLaunch("attention sm90 kernel launch",
                                     sm90_kernel<Tr, kSoftcap, kMask>(plan.fixed_softmax, cached),
                                     {dim3(static_cast<unsigned>(plan.grid)), Tr::kThreads, Tr::kSmemBytes}, map,
                                     tail_map, out_map, k_cache_map, v_cache_map, p, cols);
  return Status::Ok();
}

template <bool kSoftcap, MaskMode kMask>
Status prepare_variant(const AttentionParams& p, int head_dim, const AttentionPlan& plan, AttentionLaunches* out) {
  if (plan.kernel == AttentionKernel::kSm90) {
    if (head_dim == 128) return prepare_sm90<Sm90Traits, kSoftcap, kMask>(p, plan, out);
    if constexpr (kMask != MaskMode::kAdditive) return prepare_sm90<Sm90Traits256, kSoftcap, kMask>(p, plan, out);
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: an additive mask at head_dim 256 runs on the sm80 kernel", kOp);
  }
  if (head_dim == Sm80Traits256::kHeadDim) return prepare_sm80<Sm80Traits256, kSoftcap, kMask>(p, plan, out);
  return prepare_sm80<Sm80Traits128, kSoftcap, kMask>(p, plan, out);
}

template <bool kSoftcap>
Status prepare_mask(const AttentionParams& p, int head_dim, const AttentionPlan& plan, AttentionLaunches* out) {
  switch (p.mask_mode) {
    case MaskMode::kCausal:
      return prepare_variant<kSoftcap, MaskMode::kCausal>(p, head_dim, plan, out);
    case MaskMode::kAdditive:
      return prepare_variant<kSoftcap, MaskMode::kAdditive>(p, head_dim, plan, out);
    case MaskMode::kNone:
      return prepare_variant<kSoftcap, MaskMode::kNone>(p, head_dim, plan, out);
    case MaskMode::kSliding:
      return prepare_variant<kSoftcap, MaskMode::kSliding>(p, head_dim, plan, out);
  }
  return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: unknown mask mode %d", kOp, static_cast<int>(p.mask_mode));
}

// Every instantiation a plan can pick, for the opt-ins.
template <bool kSoftcap, MaskMode kMask>
Status opt_in_variant() {
  const auto opt_in = [](const void* kernel, size_t bytes) { return detail::set_smem_opt_in(kOp, kernel, bytes); };
  GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(sm90_kernel<Sm90Traits, kSoftcap, kMask>(false, false)),
                            Sm90Traits::kSmemBytes));
  GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(sm90_kernel<Sm90Traits, kSoftcap, kMask>(true, false)),
                            Sm90Traits::kSmemBytes));
  if constexpr (kMask == MaskMode::kCausal || kMask == MaskMode::kSliding) {  // the sm90 kernel's cached forms
    GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(sm90_kernel<Sm90Traits, kSoftcap, kMask>(false, true)),
                              Sm90Traits::kSmemBytes));
    GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(sm90_kernel<Sm90Traits256, kSoftcap, kMask>(false, true)),
                              Sm90Traits256::kSmemBytes));
  }
  if constexpr (kMask != MaskMode::kAdditive) {  // head_dim 256 on the sm90 kernel; the sm80 kernel's cached forms
    GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(sm90_kernel<Sm90Traits256, kSoftcap, kMask>(false, false)),
                              Sm90Traits256::kSmemBytes));
    GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(attention_fwd_kernel<Sm80Traits128, kSoftcap, kMask, true>),
                              Sm80Traits128::kSmemBytes));
    GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(attention_fwd_kernel<Sm80Traits256, kSoftcap, kMask, true>),
                              Sm80Traits256::kSmemBytes));
  }
  GK_RETURN_IF_ERROR(opt_in(reinterpret_cast<const void*>(attention_fwd_kernel<Sm80Traits128, kSoftcap, kMask>),
                            Sm80Traits128::kSmemBytes));
  return opt_in(reinterpret_cast<const void*>(attention_fwd_kernel<Sm80Traits256, kSoftcap, kMask>),
                Sm80Traits256::kSmemBytes);
}

template <bool kSoftcap>
Status opt_in_softcap() {
  GK_RETURN_IF_ERROR((opt_in_variant<kSoftcap, MaskMode::kCausal>()));
  GK_RETURN_IF_ERROR((opt_in_variant<kSoftcap, MaskMode::kAdditive>()));
  GK_RETURN_IF_ERROR((opt_in_variant<kSoftcap, MaskMode::kSliding>()));
  return opt_in_variant<kSoftcap, MaskMode::kNone>();
}

}  // namespace

Status prepare_attention_kernels() {
  GK_RETURN_IF_ERROR(opt_in_softcap<true>());
  GK_RETURN_IF_ERROR(opt_in_softcap<false>());
  return prepare_decode_kernels();
}

Status AttentionLaunches::issue(const char* op, bool programmatic, cudaStream_t stream) const {
  detail::LaunchList launches;
  GK_RETURN_IF_ERROR(append(programmatic, &launches));
  return detail::issue_launches(op, launches, /*graphs=*/nullptr, stream);
}

Status AttentionLaunches::append(bool programmatic, detail::LaunchList* out) const {
  for (const detail::KernelLaunch* l : {&classify, &list, &kernel, &combine}) {
    if (l->empty()) continue;
    detail::KernelLaunch* slot = out->add();
    if (slot == nullptr) return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: more launches than a list holds", kOp);
    *slot = *l;
    // The combine step always follows the decode kernel: programmatic whatever the first kernel's launch is.
    slot->set_programmatic(l == &combine || programmatic);
  }
  return Status::Ok();
}

Status prepare_attention(AttentionParams p, int head_dim, const AttentionPlan& plan, AttentionLaunches* out) {
  if (head_dim != Sm80Traits128::kHeadDim && head_dim != Sm80Traits256::kHeadDim) {
    return detail::error(GK_STATUS_NOT_SUPPORTED, "%s: no attention kernel for head_dim %d", kOp, head_dim);
  }
  if (p.kv_lens != nullptr &&
      (p.mask_mode == MaskMode::kAdditive ||
       (plan.kernel == AttentionKernel::kSm90 &&
        (p.mask_mode == MaskMode::kNone || plan.tail_rows > 0 || plan.fixed_softmax)))) {
    return detail::error(GK_STATUS_INTERNAL_ERROR,
                         "%s: a key/value cache runs unmasked or causal, and on the sm90 kernel only causal, without "
                         "packed tails or the fixed-reference softmax", kOp);
  }
  if (plan.kernel == AttentionKernel::kDecode) {
    *out = AttentionLaunches{};
    return prepare_decode(p, head_dim, plan, out);
  }
  const bool sm90 = plan.kernel == AttentionKernel::kSm90;
  if (plan.block_m != (sm90 ? kSm90Block : kSm80Block) || plan.block_n != sm90_key_tile(head_dim, sm90)) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: the plan's tiles %dx%d are not the kernel's at head_dim %d",
                         kOp, plan.block_m, plan.block_n, head_dim);
  }
  // A column pair of the mask loads as one 4-byte word when no pair can straddle a row end or a word boundary.
  p.mask_pairs = p.mask_mode == MaskMode::kAdditive && p.seq_len % 2 == 0 && p.mask_row_stride % 2 == 0 &&
                 p.mask_batch_stride % 2 == 0 && reinterpret_cast<uintptr_t>(p.mask) % 4 == 0;
  *out = AttentionLaunches{};
  return p.softcap ? prepare_mask<true>(p, head_dim, plan, out) : prepare_mask<false>(p, head_dim, plan, out);
}

}  // namespace gk::gemma3
