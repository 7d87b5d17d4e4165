// The attention mask, in one place for both kernels: which key tiles a query block visits (visit, key_tile) and which
// keys a query row sees (hide, mask_edge): none past the sequence end; causal, none right of the diagonal; a sliding
// window, also none `window` or more left of it. The one other place that knows the mask's shape is each kernel's
// test for an edge tile (a tile that may hold hidden keys), written out there: as a call of a policy function it
// changed the generated code. The additive mask's values, and its
// per-call tile lists (mask_tiles.cu), are applied by the helpers below it.
#pragma once

#include <cuda_bf16.h>

#include <cfloat>
#include <cstdint>

#include "common/device/kv_cache.cuh"
#include "common/device/sm80_primitives.cuh"
#include "attention/params.hpp"
#include "attention/work_tile.hpp"

namespace gk::gemma3 {

// An additive tile list's entry (MaskTileLists) as the key tile it names, for the 64-row half `half`.
template <int kBlockN>
__host__ __device__ __forceinline__ KeyTile decode_key_entry(const TileCoord& t, uint32_t e, int half) {
  // A packed tail's positions all lie in the block's first 64 rows (group_size >= 2 heads of tail_rows fit in 128).
  const int h = t.tail_rows > 0 ? 0 : half;
  return {static_cast<int>(e >> 4) * kBlockN, (e >> (2 * h)) & 3u};
}

template <MaskMode kMask>
struct MaskPolicy {
  static constexpr bool kCausal = kMask == MaskMode::kCausal || kMask == MaskMode::kSliding;
  static constexpr bool kWindow = kMask == MaskMode::kSliding;
  static constexpr bool kAdditive = kMask == MaskMode::kAdditive;

  // Which key tiles a query block of kBlockM rows from t.m0 visits: t.n_blocks (and the additive mask's t.list,
  // t.bounded). Keys past the sequence end are never visited; under a causal mask neither are those right of the
  // block's last row, and under a sliding window those left of the window of its first row (which the tile
  // scheduler's order needs no change for: every block past the first window visits as many); an additive mask's
  // list leaves out the tiles it kills (mask_tiles.cu). kBoundedFlag: the list kernel set the bounded flag
  // (prepare_mask_tiles' mark_bounded), only for a kernel that reads it.
  // kCached: the kernels' cached forms (AttentionParams::kv_lens): positions and keys shift by the cached length.
  template <int kBlockM, int kBlockN, bool kBoundedFlag, bool kCached = false>
  __host__ __device__ __forceinline__ static void visit(const AttentionParams& p, TileCoord& t) {
    int p0 = 0, key_len = p.seq_len;
    if constexpr (kCached) {
      // The host checked that the caller's bound on the lengths leaves room; a length past it still reads nothing
      // beyond the cache (its results are then as wrong as its length, never out of bounds).
      p0 = device::cached_tokens(p.kv_lens[t.b], p.kv_capacity, p.seq_len);
      key_len = p0 + p.seq_len;
      t.p0 = p0;
      t.key_len = key_len;
    }
    t.n_blocks = (key_len + kBlockN - 1) / kBlockN;
    t.n_lo = 0;
    if constexpr (kCausal) t.n_blocks = min(t.n_blocks, (p0 + t.m0 + kBlockM + kBlockN - 1) / kBlockN);
    if constexpr (kWindow) {
      t.n_lo = max(0, p0 + t.m0 - (p.window - 1)) / kBlockN;
      t.n_blocks -= t.n_lo;
    }
    if constexpr (kAdditive) {
      const int count = p.tiles.counts[t.block];
      t.n_blocks = kBoundedFlag ? count & kListCountMask : count;
      if constexpr (kBoundedFlag) t.bounded = (count & kListBounded) != 0;
      t.list = p.tiles.entries + int64_t(t.block) * p.tiles.stride;
    }
  }

  // The i-th key tile the work tile visits, for its 64-row half `half`.
  template <int kBlockN>
  __host__ __device__ __forceinline__ static KeyTile key_tile(const TileCoord& t, int i, int half) {
    if constexpr (kAdditive) {
      return decode_key_entry<kBlockN>(t, t.list[i], half);
    } else if constexpr (kCausal) {
      // The diagonal tile first: the consumers' peeled first step is then the only one with masked keys, and a
      // warpgroup whose rows end before the tile's 65th key takes only its first 64 (attention_sm90.cuh).
      const int tile = i == 0 ? t.n_blocks - 1 : i - 1;
      return {(kWindow ? t.n_lo + tile : tile) * kBlockN, kMaskNone};
    } else {
      return {i * kBlockN, kMaskNone};
    }
  }

  // The logit x of query row `row` and key `col` to -inf where the row does not see the key: keys past the sequence
  // end; causal: keys right of the diagonal; sliding window: and keys `window` or more left of it.
  __device__ __forceinline__ static float hide(float x, int row, int col, int seq_len, int window) {
    bool masked = col >= seq_len;
    if constexpr (kCausal) masked |= col > row;
    if constexpr (kWindow) masked |= row - col >= window;
    if (masked) x = -INFINITY;
    return x;
  }

  // An edge tile's hidden logits to -inf: the thread's two rows, column pairs col0 + 8 nt + {0, 1}.
  template <int kNTiles>
  __device__ __forceinline__ static void mask_edge(float (&s)[kNTiles][4], const int (&rows)[2], int col0,
                                                   int seq_len, int window) {
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = hide(s[nt][e], rows[e >> 1], col0 + nt * 8 + (e & 1), seq_len, window);
      }
    }
  }
};

// With a cache whose sequences start late (AttentionParams::kv_starts: a left-padded batch), keys before `start` to
// -inf: the thread's column pairs col0 + 8 nt + {0, 1}. Only a tile that starts before `start` needs it.
template <int kNTiles>
__device__ __forceinline__ void hide_before(float (&s)[kNTiles][4], int col0, int start) {
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (col0 + nt * 8 + (e & 1) < start) s[nt][e] = -INFINITY;
    }
  }
}

// An additive mask value as a base-2 logit offset. Clamped at -FLT_MAX, so the lowest bf16 and -inf both stay
// finite: a row masked everywhere then averages V uniformly (what the reference computes), never NaN. A value
// that clamps is "dead": adding -FLT_MAX absorbs any finite score, so its probability is exactly zero as soon as
// its row has one live key. The tile classification (mask_tiles.cu, mask_live.hpp) decides liveness the same way,
// which is what makes skipping a tile of dead values exact.
__device__ __forceinline__ float mask_logit2(float m) { return fmaxf(m * kLog2e, -FLT_MAX); }

// Adds the additive mask to the logits a thread holds (query positions rows[0] and rows[1], column pairs
// col0 + 8 nt + {0, 1});
// keys at or past the sequence end are left to the edge masking, rows there get nothing (they are not stored). With
// p.mask_pairs a column pair is one 4-byte load.
template <int kNTiles>
__device__ __forceinline__ void add_mask_values(float (&s)[kNTiles][4], const AttentionParams& p,
                                                const __nv_bfloat16* mask_rows, const int (&rows)[2], int col0) {
  const int seq_len = p.seq_len;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int row = rows[hh];
    if (row >= seq_len) continue;
    const __nv_bfloat16* m_row = mask_rows + int64_t(row) * p.mask_row_stride;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      const int col = col0 + nt * 8;
      if (col >= seq_len) continue;
      float m0, m1 = 0.f;
      if (p.mask_pairs) {
        const float2 m = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(m_row + col));
        m0 = m.x;
        m1 = m.y;
      } else {
        m0 = __bfloat162float(m_row[col]);
        if (col + 1 < seq_len) m1 = __bfloat162float(m_row[col + 1]);
      }
      s[nt][2 * hh] += mask_logit2(m0);
      s[nt][2 * hh + 1] += mask_logit2(m1);
    }
  }
}

// A tile whose mask values are all 0 or dead reads one 64-bit live word per row and 64-column part instead of a
// load per column pair (mask_tiles.cu: column 2l at bit l, column 2l + 1 at bit 32 + l). These are the words of the
// thread's two rows over the tile starting at key n0 (a multiple of 64), as w[row][part]; a row past the sequence
// end gets all-live words (nothing added: the row is padding, never stored). The Hopper kernel loads them before it
// waits for the tile's scores, so that their latency overlaps the Q K^T.
template <int kNTiles>
__device__ __forceinline__ void load_mask_bits(uint64_t (&w)[2][2], const AttentionParams& p, int b,
                                               const int (&rows)[2], int n0) {
  static_assert(kNTiles == 8 || kNTiles == 16, "64- or 128-key tiles");
  const MaskTileLists& t = p.tiles;
  const int pn = n0 / 64;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int row = rows[hh];
    w[hh][0] = w[hh][1] = ~0ull;
    if (row >= p.seq_len) continue;
    const uint64_t* words = t.bits + ((int64_t(b) * t.parts + row / 64) * t.parts + pn) * 64 + row % 64;
    w[hh][0] = *words;
    // Past the last part the columns are past the sequence end: the edge masking takes them.
    if (kNTiles == 16 && pn + 1 < t.parts) w[hh][1] = words[64];
  }
}

// A dead position adds `dead`: -FLT_MAX, exactly what add_mask_values adds there (mask_logit2), or -inf where the
// tile list allows it (kMaskBits in the Hopper kernel's unscaled tiles).
// The thread's pair in a part is columns 8 (nt % 8) + 2 (lane % 4) and the next: bits 4 (nt % 8) + lane % 4 of the
// word's halves. Each half is shifted by lane % 4 once, so every test is one AND with an immediate (a test of a
// 64-bit word at a lane-dependent bit takes two, and one more shift per pair).
template <int kNTiles>
__device__ __forceinline__ void apply_mask_bits(float (&s)[kNTiles][4], const uint64_t (&w)[2][2], int lane,
                                                float dead) {
  static_assert(kNTiles % 8 == 0, "whole 64-column parts");
  const int q = lane & 3;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
#pragma unroll
    for (int part = 0; part < kNTiles / 8; ++part) {
      const uint32_t even = static_cast<uint32_t>(w[hh][part]) >> q;
      const uint32_t odd = static_cast<uint32_t>(w[hh][part] >> 32) >> q;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int nt = part * 8 + j;
        if (!(even & (1u << (4 * j)))) s[nt][2 * hh] += dead;
        if (!(odd & (1u << (4 * j)))) s[nt][2 * hh + 1] += dead;
      }
    }
  }
}

}  // namespace gk::gemma3
