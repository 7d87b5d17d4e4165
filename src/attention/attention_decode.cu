// Launch of the decode kernel and its combine step (attention_decode.cuh): head_dim {128, 256} x {softcap on, off} x
// {causal, sliding window, none}.
#include "attention/attention.hpp"
#include "attention/attention_decode.cuh"
#include "attention/attention_plan.hpp"
#include "common/device_props.hpp"
#include "common/kernel_launch.hpp"

namespace gk::gemma3 {

namespace {

constexpr const char* kOp = "gemma3_attention";

using DecodeKernel = void (*)(AttentionParams);

template <class Tr, bool kSoftcap>
DecodeKernel decode_kernel(MaskMode mask) {
  switch (mask) {
    case MaskMode::kCausal:
      return attention_decode_kernel<Tr, kSoftcap, MaskMode::kCausal>;
    case MaskMode::kSliding:
      return attention_decode_kernel<Tr, kSoftcap, MaskMode::kSliding>;
    case MaskMode::kNone:
      return attention_decode_kernel<Tr, kSoftcap, MaskMode::kNone>;
    default:
      return nullptr;
  }
}

template <int kHeadDim>
Status prepare_decode_for(AttentionParams p, const AttentionPlan& plan, AttentionLaunches* out) {
  using Tr = DecodeTraits<kHeadDim>;
  const int64_t kv_heads = p.num_q_heads / p.group_size;
  const int64_t row_blocks = decode_row_blocks(p.seq_len, p.group_size);
  const DecodeKernel kernel = p.softcap ? decode_kernel<Tr, true>(p.mask_mode) : decode_kernel<Tr, false>(p.mask_mode);
  if (kernel == nullptr || p.kv_lens == nullptr || plan.splits < 1 || plan.splits > kDecodeMaxSplits ||
      !decode_applies(p.seq_len) || p.batch * kv_heads > 65535 || (plan.splits > 1 && p.decode_partial == nullptr)) {
    return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: a decode attention the kernel cannot take", kOp);
  }
  p.decode_splits = plan.splits;
  const dim3 grid(static_cast<unsigned>(plan.splits), static_cast<unsigned>(row_blocks),
                  static_cast<unsigned>(p.batch * kv_heads));
  out->kernel = detail::KernelLaunch("attention decode kernel launch", kernel, {grid, Tr::kThreads, Tr::kSmemBytes}, p);
  if (plan.splits > 1) {
    const int64_t rows = int64_t(p.batch) * p.num_q_heads * p.seq_len;
    out->combine = detail::KernelLaunch("attention decode combine launch", decode_combine_kernel<kHeadDim>,
                                        {dim3(static_cast<unsigned>(rows)), 128}, p);
  }
  return Status::Ok();
}

template <int kHeadDim>
Status opt_in_decode() {
  using Tr = DecodeTraits<kHeadDim>;
  for (bool softcap : {false, true}) {
    for (MaskMode mask : {MaskMode::kCausal, MaskMode::kSliding, MaskMode::kNone}) {
      const DecodeKernel kernel = softcap ? decode_kernel<Tr, true>(mask) : decode_kernel<Tr, false>(mask);
      GK_RETURN_IF_ERROR(detail::set_smem_opt_in(kOp, reinterpret_cast<const void*>(kernel), Tr::kSmemBytes));
    }
  }
  return Status::Ok();
}

}  // namespace

Status prepare_decode(AttentionParams p, int head_dim, const AttentionPlan& plan, AttentionLaunches* out) {
  if (head_dim == 128) return prepare_decode_for<128>(p, plan, out);
  if (head_dim == 256) return prepare_decode_for<256>(p, plan, out);
  return detail::error(GK_STATUS_INTERNAL_ERROR, "%s: no decode kernel for head_dim %d", kOp, head_dim);
}

Status prepare_decode_kernels() {
  GK_RETURN_IF_ERROR(opt_in_decode<128>());
  return opt_in_decode<256>();
}

}  // namespace gk::gemma3
