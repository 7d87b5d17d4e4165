// Which attention kernel runs a call and how: plain C++ for the layer's planner and the host tests; the launcher
// (attention_launch.cu) executes the plan. The thresholds are the table at the top of attention_plan.cpp.
#pragma once

#include <cstdint>

#include "attention/params.hpp"
#include "common/device_props.hpp"
#include "common/internal_api.hpp"
#include "common/overrides.hpp"

namespace gk::gemma3 {

// kDecode: a few new tokens over a key/value cache (attention_decode.cuh; chosen by the layer's cached steps).
enum class AttentionKernel { kSm90, kSm80, kDecode };
// The kernels' query blocks, as instantiated (attention_launch.cu checks them against the traits).
inline constexpr int kSm90Block = 128, kSm80Block = 64;
// Their key tiles: the sm80-class kernel's are square; the sm90 kernel's are 128 keys at head_dim 128 and 64 at 256
// (its register budget: sm90_traits.cuh).
constexpr int sm90_key_tile(int head_dim, bool sm90) { return !sm90 ? kSm80Block : head_dim == 128 ? 128 : 64; }

// What the planner needs of a call.
struct AttentionShape {
  int batch = 0, seq_len = 0, num_q_heads = 0, group_size = 1, head_dim = 0;
  MaskMode mask = MaskMode::kCausal;
  bool softcap = false;
  float softcap_out = 0.f;  // cap * log2(e) (AttentionParams::softcap_out)
  // Without a cache: q, k, v are column ranges of one packed buffer the sm90 kernel's tensor map covers. With one:
  // q is the packed buffer's first columns or a head-major [B][Hq][S][D] tensor, and k and v are caches the
  // kernel's cache maps cover (the sm90 kernel's cached form, left padding included).
  bool sm90_layout = false;
  bool cached = false;       // keys and values come from a key/value cache (AttentionParams::kv_lens)
  bool q_heads = false;      // cached: q is head-major [B][Hq][S][D] (not the packed rows)
  bool o_tma = false;        // the output's heads are contiguous 16-byte aligned rows (TMA stores)
};

struct AttentionPlan {
  AttentionKernel kernel = AttentionKernel::kSm80;
  int block_m = 0, block_n = 0;  // the kernel's query block and key tile
  int tail_rows = 0;             // sm90: rows per head of the packed GQA tail (0: one tile per head)
  bool o_tma = false;            // sm90: output tiles leave by TMA stores (packed tails always by 16-byte stores)
  bool fixed_softmax = false;    // sm90, softcap: probabilities against a fixed reference, not the running maximum
  bool q_heads = false;          // sm90 cached form: q read through a [B * Hq][S][D] map (AttentionShape::q_heads)
  float fixed_bias = 0.f;        // that reference (fixed_softmax.hpp)
  int64_t tiles = 0;             // work tiles
  int grid = 0;                  // CTAs: one per tile (sm80), at most one per SM (sm90, persistent)
  int splits = 0;                // decode: CTAs the key range of each (sequence, kv head, row block) is split over
};

// Work tiles of `block_m` query rows: one per (query block, batch, query head), except that a packed GQA tail takes one
// tile per (batch, kv head) for the last query block.
inline int64_t attention_tiles(const AttentionShape& s, int block_m, int tail_rows) {
  const int64_t heads = int64_t(s.batch) * s.num_q_heads;
  const int64_t n = int64_t((s.seq_len + block_m - 1) / block_m) * heads;
  return tail_rows > 0 ? n - heads + heads / s.group_size : n;
}

// The shape of a call with these parameters (the layout checks use `head_dim`-wide heads).
GK_INTERNAL_API AttentionShape attention_shape(const AttentionParams& p, int head_dim);

// The plan for `s` on `dev`, with `ov`'s attention.* keys pinning choices where the pinned kernel can run.
GK_INTERNAL_API Status plan_attention(const AttentionShape& s, const detail::DeviceInfo& dev,
                                      const detail::Overrides& ov,
                      AttentionPlan* plan);
// The plan's choices as override values (attention.kernel, .tail, .store, .softmax).
GK_INTERNAL_API void record_attention_choices(const AttentionPlan& plan, detail::Overrides* chosen);

}  // namespace gk::gemma3
