// Variant selection and launch of the attention kernel. The supported matrix is instantiated explicitly here:
// head_dim 128 x {softcap on, off} x {causal, additive, none}.
#include "common/cuda_check.hpp"
#include "gemma3_attention/attention_kernel.cuh"
#include "gemma3_attention/kernels.hpp"

namespace gk::gemma3 {

namespace {

using Traits128 = AttentionTraits</*kBlockM=*/64, /*kBlockN=*/64, /*kHeadDim=*/128, /*kWarps=*/4>;

template <class Tr, bool kSoftcap, MaskMode kMask>
Status launch_variant(AttentionParams p, cudaStream_t stream) {
  constexpr const char* kOp = "gemma3_attention";
  auto kernel = attention_fwd_kernel<Tr, kSoftcap, kMask>;
  GK_RETURN_IF_ERROR(detail::cuda_status(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Tr::kSmemBytes)),
      kOp, "cudaFuncSetAttribute(attention)"));
  p.num_m_blocks = (p.seq_len + Tr::kBlockM - 1) / Tr::kBlockM;
  const int64_t blocks = int64_t(p.num_m_blocks) * p.batch * p.num_q_heads;
  if (blocks > INT32_MAX) {
    return detail::error(GK_STATUS_INVALID_ARGUMENT, "%s: batch*num_q_heads*ceil(seq_len/%d) = %lld exceeds 2^31-1",
                         kOp, Tr::kBlockM, static_cast<long long>(blocks));
  }
  kernel<<<static_cast<unsigned>(blocks), Tr::kThreads, Tr::kSmemBytes, stream>>>(p);
  return detail::check_launch(kOp, "attention kernel launch");
}

template <class Tr, bool kSoftcap>
Status launch_mask(const AttentionParams& p, cudaStream_t stream) {
  switch (p.mask_mode) {
    case MaskMode::kCausal:
      return launch_variant<Tr, kSoftcap, MaskMode::kCausal>(p, stream);
    case MaskMode::kAdditive:
      return launch_variant<Tr, kSoftcap, MaskMode::kAdditive>(p, stream);
    case MaskMode::kNone:
      return launch_variant<Tr, kSoftcap, MaskMode::kNone>(p, stream);
  }
  return detail::error(GK_STATUS_INTERNAL_ERROR, "gemma3_attention: unknown mask mode %d",
                       static_cast<int>(p.mask_mode));
}

}  // namespace

Status launch_attention(AttentionParams p, int head_dim, cudaStream_t stream) {
  if (head_dim != Traits128::kHeadDim) {
    return detail::error(GK_STATUS_NOT_SUPPORTED, "gemma3_attention: no attention kernel for head_dim %d", head_dim);
  }
  return p.softcap ? launch_mask<Traits128, true>(p, stream) : launch_mask<Traits128, false>(p, stream);
}

}  // namespace gk::gemma3
