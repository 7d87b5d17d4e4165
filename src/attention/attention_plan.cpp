#include "attention/attention_plan.hpp"

#include <algorithm>

#include "attention/fixed_softmax.hpp"
#include "attention/tail_packing.hpp"
#include "common/status_util.hpp"

namespace gk::gemma3 {

namespace {

// The planner's thresholds; docs/dispatch.md gives the measurements behind each.
// The sm90 kernel's 128-row tiles fill the GPU only with at least one tile per two SMs: fewer go to the 64-row sm80
// kernel, twice the CTAs (docs/perf-log.md v3).
constexpr int64_t kSm90MaxSmsPerTile = 2;
// Additive mode carries both softmax forms in one kernel (a block takes the fixed one where its tile list is
// bounded): that pays from long sequences on and costs below (v20.5).
constexpr int kAdditiveFixedMinSeqLen = 2048;
// The largest tile count a persistent grid can index (its last round runs past num_tiles by up to one grid).
constexpr int64_t kMaxTiles = INT32_MAX - 65536;

}  // namespace

AttentionShape attention_shape(const AttentionParams& p, int head_dim) {
  AttentionShape s;
  s.batch = p.batch;
  s.seq_len = p.seq_len;
  s.num_q_heads = p.num_q_heads;
  s.group_size = p.group_size;
  s.head_dim = head_dim;
  s.mask = p.mask_mode;
  s.softcap = p.softcap;
  s.softcap_out = p.softcap_out;
  // The sm90 kernel reads q, k and v through one tensor map: q's heads from column 0, k's and v's (in either
  // order) after them, apart, within one packed row (with a cache, k and v through maps of their own); its output
  // leaves in 16-byte pieces at least.
  const int64_t width = p.q_token_stride, D = head_dim;
  const int64_t q_span = int64_t(p.num_q_heads) * D, kv_span = int64_t(p.num_q_heads / p.group_size) * D;
  const auto aligned16 = [](const void* a) { return reinterpret_cast<uintptr_t>(a) % 16 == 0; };
  const bool o_pieces = aligned16(p.o) && p.o_token_stride % 8 == 0 && p.o_head_stride % 8 == 0 &&
                        p.o_batch_stride % 8 == 0;
  const bool q_and_o = p.q_head_stride == D && p.q_batch_stride == p.seq_len * width && width % 8 == 0 &&
                       width >= q_span && aligned16(p.q) && o_pieces;
  s.cached = p.kv_lens != nullptr;
  if (s.cached) {
    // Each cache [B][Hkv][capacity][D], contiguous (one tensor map over [B * Hkv][capacity][D]), 16-byte aligned.
    const auto cache = [&](const void* a, int64_t token, int64_t head, int64_t batch) {
      return token == D && head == int64_t(p.kv_capacity) * D && batch == kv_span / D * head && aligned16(a);
    };
    // q: the packed rows' first columns, or head-major [B][Hq][S][D] (gemma3_attend's query).
    const bool q_heads = p.q_token_stride == D && p.q_head_stride == int64_t(p.seq_len) * D &&
                         p.q_batch_stride == q_span * p.seq_len && aligned16(p.q) && o_pieces;
    s.q_heads = !q_and_o && q_heads;  // the packed rows' reading where both hold (one head and one token)
    s.sm90_layout = (q_and_o || q_heads) &&
                    cache(p.k, p.k_token_stride, p.k_head_stride, p.k_batch_stride) &&
                    cache(p.v, p.v_token_stride, p.v_head_stride, p.v_batch_stride);
  } else {
    const int64_t k_col = p.k - p.q, v_col = p.v - p.q;
    const bool columns = k_col >= q_span && v_col >= q_span && k_col + kv_span <= width &&
                         v_col + kv_span <= width && (k_col + kv_span <= v_col || v_col + kv_span <= k_col);
    s.sm90_layout = q_and_o && p.k_token_stride == width && p.v_token_stride == width && p.k_head_stride == D &&
                    p.v_head_stride == D && p.k_batch_stride == p.q_batch_stride &&
                    p.v_batch_stride == p.q_batch_stride && columns;
  }
  // TMA stores of whole boxes: heads of head_dim contiguous elements.
  s.o_tma = p.o_head_stride == D && p.o_token_stride >= int64_t(p.num_q_heads) * D;
  return s;
}

Status plan_attention(const AttentionShape& s, const detail::DeviceInfo& dev, const detail::Overrides& ov,
                      AttentionPlan* plan) {
  AttentionPlan p;
  // A narrow grid takes the 64-row sm80-class kernel at head_dim 128 (twice the CTAs). At 256 the Hopper kernel's
  // speed per tile outweighs the CTAs it gives up, on every grid measured (docs/perf-log.md v43).
  const bool wide_grid = s.head_dim == 256 || kSm90MaxSmsPerTile * attention_tiles(s, kSm90Block, 0) >= dev.sms;
  // The sm90 kernel is built for head_dim 128, and for 256 without the additive mask (its tile lists and the
  // fixed-reference softmax are instantiated at 128 only); the rest run on the sm80-class kernel.
  // With a cache, causal masking or a window only.
  const bool sm90_built = (s.head_dim == 128 || (s.head_dim == 256 && s.mask != MaskMode::kAdditive)) &&
                          (!s.cached || s.mask == MaskMode::kCausal || s.mask == MaskMode::kSliding);
  const bool sm90 = s.sm90_layout && sm90_built && ov.attention_kernel != 1 && (ov.attention_kernel == 0 || wide_grid);
  if (sm90) {
    p.kernel = AttentionKernel::kSm90;
    p.block_m = kSm90Block;
    p.block_n = sm90_key_tile(s.head_dim, true);
    // The cached form keeps one work tile per head and the running maximum (its instantiations).
    p.tail_rows = ov.attention_tail == 1 || s.cached ? 0 : packed_tail_rows(s.seq_len, s.group_size, kSm90Block);
    p.o_tma = s.o_tma && ov.attention_store != 1;
    p.q_heads = s.q_heads;
    if (s.softcap && s.head_dim == 128 && !s.cached) {
      const bool wanted = s.mask != MaskMode::kAdditive
                              ? ov.attention_softmax != 0
                              : ov.attention_softmax == 1 ||
                                    (ov.attention_softmax == detail::kAuto && s.seq_len >= kAdditiveFixedMinSeqLen);
      p.fixed_softmax = wanted && fixed_softmax_bias(s.softcap_out, &p.fixed_bias);
    }
  } else {
    p.kernel = AttentionKernel::kSm80;
    p.block_m = p.block_n = kSm80Block;
  }
  p.tiles = attention_tiles(s, p.block_m, p.tail_rows);
  if (p.tiles > kMaxTiles) {
    return detail::error(GK_STATUS_INVALID_ARGUMENT,
                         "gemma3_attention: %lld work tiles of %d query rows exceed the limit %lld",
                         static_cast<long long>(p.tiles), p.block_m, static_cast<long long>(kMaxTiles));
  }
  p.grid = static_cast<int>(sm90 ? std::min<int64_t>(p.tiles, dev.sms) : p.tiles);
  *plan = p;
  return Status::Ok();
}

void record_attention_choices(const AttentionPlan& plan, detail::Overrides* chosen) {
  const bool sm90 = plan.kernel == AttentionKernel::kSm90;
  // The decode kernel has no pin of its own: it is what a cached call of few new tokens runs unless the sm80 kernel
  // is pinned, so its plan names no attention kernel.
  chosen->attention_kernel = sm90 ? 0 : plan.kernel == AttentionKernel::kDecode ? detail::kAuto : 1;
  chosen->attention_tail = sm90 ? (plan.tail_rows > 0 ? 0 : 1) : detail::kAuto;
  chosen->attention_store = sm90 ? (plan.o_tma ? 0 : 1) : detail::kAuto;
  chosen->attention_softmax = sm90 ? (plan.fixed_softmax ? 1 : 0) : detail::kAuto;
}

}  // namespace gk::gemma3
