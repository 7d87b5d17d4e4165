// Parameter block of the attention kernels (sm80 and sm90). Filled on the host (gemma3_layer/layer.cpp), where
// every scalar the kernels would otherwise recompute per element is folded once.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

namespace gk::gemma3 {

inline constexpr float kLog2e = 1.4426950408889634f;

// kSliding: causal within a window of p.window keys, Hugging Face's sliding window: query i sees key j iff j <= i and
// i - j < window (window >= 1).
enum class MaskMode : int { kCausal = 0, kAdditive = 1, kNone = 2, kSliding = 3 };

// The additive mask's classification runs one CTA row per 64 query rows (grid.y <= 65535).
inline constexpr int64_t kMaxAdditiveMaskSeqLen = int64_t(65535) * 64;

// How a visited key tile applies the additive mask to one 64-row half of a query block.
enum MaskApply : uint32_t {
  kMaskNone = 0,  // every value 0: nothing to add
  // Every value 0 or dead: the per-element live bits say which scores are dead. Every row of the block has a live
  // key, so a dead score may be -inf (probability 0, as -FLT_MAX gives), and the Hopper kernel leaves such a tile
  // unscaled.
  kMaskBits = 1,
  kMaskValues = 2,  // other values: read the mask itself
  // kMaskBits in a block with a row that is dead everywhere: dead scores get -FLT_MAX in base-2 logits, as
  // add_mask_values gives them, so that such a row's scores stay equal (the reference averages V over its keys).
  kMaskBitsDeadRow = 3,
};
// Both kinds of bits tile: bit 0 of the kind.
__host__ __device__ constexpr bool mask_apply_bits(uint32_t apply) { return (apply & 1u) != 0u; }

inline constexpr int kListBounded = 1 << 30;
inline constexpr int kListCountMask = kListBounded - 1;

// Tile lists for the additive mask, built on the device per call (mask_tiles.cu) for the kernel's block shape:
// for each (batch, query block), the key tiles to visit in ascending order, each entry
// (key tile << 4) | apply(rows 0-63) | apply(rows 64-127) << 2. Key tiles whose values are all dead for every row
// of the block are left out, unless some row of the block is dead everywhere: such a row averages V over all
// keys, so its block keeps every tile and its bits tiles are kMaskBitsDeadRow. `bits` holds, per 64 x 64 part of
// the mask, one 64-bit word per row (bit l: column 2l is live, bit 32 + l: column 2l + 1),
// [batch][part rows][part columns][64].
struct MaskTileLists {
  uint32_t* entries;  // [batch][query blocks][key tiles]
  // [batch][query blocks]: the entry count; for the Hopper kernel's fixed form (build_mask_tiles' mark_bounded),
  // | kListBounded where no entry of the block applies mask values and no row of it is dead everywhere, so its
  // logits stay within the softcap's bounds (a fixed softmax reference holds).
  int* counts;
  int stride;         // entries per query block (key tiles of the sequence)
  const uint64_t* bits;
  int parts;          // 64-wide parts per side: ceil(S / 64)
};

// Attention over tensors laid out [B, S, heads, D] with arbitrary token/head/batch strides (elements).
struct AttentionParams {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  const __nv_bfloat16* mask;  // additive [B,1,S,S] (kAdditive only)
  __nv_bfloat16* o;

  int64_t q_token_stride, k_token_stride, v_token_stride, o_token_stride;
  int64_t q_head_stride, k_head_stride, v_head_stride, o_head_stride;
  int64_t q_batch_stride, k_batch_stride, v_batch_stride, o_batch_stride;
  int64_t mask_batch_stride, mask_row_stride;

  int batch;
  int seq_len;
  int num_q_heads;
  int group_size;  // query heads per kv head
  int num_m_blocks;
  // The work tiles a (persistent) grid walks: num_m_blocks * batch * num_q_heads, or with packed GQA tails
  // (tail_rows > 0, Hopper kernel) (num_m_blocks - 1) * batch * num_q_heads + batch * num_kv_heads.
  int num_tiles;
  // Hopper kernel: > 0 packs the last, partial query block of the group_size heads of a kv head into one work
  // tile, tail_rows (a multiple of 8, >= seq_len % 128) rows per head; 0 keeps one tile per head.
  int tail_rows;
  int tail_inv;  // tail_reciprocal(tail_rows) (tail_packing.hpp)

  // Scores live in the log2 domain so the softmax uses ex2 directly.
  float scale_log2;   // no softcap: logit2 = dot * scale * log2(e)
  float softcap_in;   // softcap: logit2 = softcap_out * tanh(dot * softcap_in), softcap_in = scale / cap
  float softcap_out;  // cap * log2(e)
  // The Hopper kernel's softmax without a running maximum (fixed_softmax.hpp): p = exp2(logit2 + fixed_bias).
  float fixed_bias;
  MaskMode mask_mode;
  int window;  // kSliding: keys a query sees, itself included (>= 1)
  // A key/value cache (the prefill kernels' cached forms; null otherwise): batch element b's keys are its kv_lens[b]
  // cached tokens followed by the call's seq_len new ones, all in the cache that k and v (with their strides) point
  // into, and its new query row i sits at position kv_lens[b] + i.
  const int* kv_lens;
  int kv_capacity;  // the cache's tokens per sequence: keys are never read past it, whatever kv_lens holds
  bool softcap;
  bool mask_pairs;  // additive: even S, row stride and 4-byte base, so a thread's column pair loads as one word

  // Additive mode: the per-call scratch the launch fills (mask_tiles.cu carves it) and the lists the kernels walk.
  MaskTileLists tiles;
  void* mask_scratch;
  size_t mask_scratch_bytes;

  // Memory the kernel never reads that the next kernel will (the O projection's weights), fetched into L2 while
  // the attention runs: each CTA issues its share once (device::bulk_prefetch_l2_share). 0 bytes: none. Base and
  // size are multiples of 16 bytes.
  const void* l2_prefetch;
  uint64_t l2_prefetch_bytes;

  // The decode kernel (attention_decode.cuh): the key range of each (sequence, kv head) split over decode_splits
  // CTAs, whose partial outputs (fp32, with each row's maximum and sum) go to decode_partial and are merged by the
  // combine kernel; with one split the kernel writes the output itself.
  float* decode_partial;
  int decode_splits;
  // Optional with a cache: per sequence, the first key its queries see (a left-padded batch's pad tokens before it
  // are hidden; MaskPolicy's hide_before); null: 0.
  const int* kv_starts;
};

}  // namespace gk::gemma3
