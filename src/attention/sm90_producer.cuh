// The Hopper attention kernel's producer: one thread of warpgroup 0. It decodes each work tile into the consumers'
// slot, which the Q barrier's completion publishes to them, and issues the TMA loads of its Q and of its K and V
// tiles into the kStages ring (device::Pipeline: each stage completes on a "full" mbarrier and is released by the
// consumers through an "empty" one). The ring and its phases run on across work tiles, and the next tile's Q loads
// as soon as the consumers' last Q K^T of the current one has completed, so the loads of one tile overlap the last
// P*V and the output store of the previous. That load has only the last tile's softmax, P*V and store to hide in,
// so the producer asks L2 for the next tile's Q a few key tiles earlier (prefetch_q).
#pragma once

#include <cuda.h>

#include "common/device/sm90_primitives.cuh"
#include "attention/params.hpp"
#include "attention/sm90_traits.cuh"
#include "attention/tile_scheduler.cuh"

namespace gk::gemma3 {

// kCached: keys and values come from a key/value cache [B][Hkv][capacity][D] through their own tensor maps
// (k_cache_map, v_cache_map: [B * Hkv][capacity][D]); q from the packed rows, or head-major (q_coords).
template <class Tr, MaskMode kMask, bool kFixedRef, bool kCached = false>
struct Sm90Producer {
  // The decoded work tile `tile` (tile_coord) as the consumers' slot holds it.
  __device__ __forceinline__ static TileCoord decode(const AttentionParams& p, int tile) {
    return tile_coord<kMask, Tr::kBlockM, Tr::kBlockN, kFixedRef, kCached>(p, tile);
  }

  // Where an ordinary tile's Q lies in the Q map: its first column and its z coordinate. The packed rows: column
  // h * D of batch b. A head-major query (the cached form's Sm90Columns::q_heads_z): column 0 of slice b * Hq + h.
  __device__ __forceinline__ static void q_coords(const AttentionParams& p, const TileCoord& tc,
                                                  const Sm90Columns& cols, int* col, int* z) {
    if (kCached && cols.q_heads_z) {
      *col = 0;
      *z = tc.b * p.num_q_heads + tc.h;
    } else {
      *col = tc.h * Tr::kHeadDim;
      *z = tc.b;
    }
  }

  // The work tile's Q, arming the Q barrier for its bytes.
  __device__ __forceinline__ static void load_q(const Sm90Smem<Tr>& sm, const CUtensorMap* qkv_map,
                                                const CUtensorMap* tail_map, const AttentionParams& p,
                                                const TileCoord& tc, const Sm90Columns& cols) {
    const uint32_t q_full = sm.q_pipe.full(0);
    if (tc.tail_rows == 0) {
      int q_col, q_z;
      q_coords(p, tc, cols, &q_col, &q_z);
      device::mbar_arrive_expect_tx(q_full, Tr::kQTileBytes);
#pragma unroll
      for (int box = 0; box < Tr::kBoxes; ++box) {
        // A column box of kBlockM rows as boxes of kBoxRows: each lands on whole 1024-byte swizzle atoms.
#pragma unroll
        for (int r = 0; r < Tr::kBlockM / Tr::kBoxRows; ++r) {
          device::tma_load_3d(sm.q + box * Tr::kQBoxBytes + r * Tr::kBoxBytes, qkv_map, q_full,
                              q_col + box * Tr::kBoxCols, tc.m0 + r * Tr::kBoxRows, q_z);
        }
      }
    } else {
      // Head j's tail_rows rows land at row j * tail_rows of every box (a multiple of 8 rows keeps each load on the
      // 1024-byte swizzle atom); rows past the sequence end read as zeros.
      const uint32_t head_bytes = uint32_t(tc.tail_rows) * uint32_t(Tr::kBoxRowBytes);
      device::mbar_arrive_expect_tx(q_full, uint32_t(Tr::kBoxes) * p.group_size * head_bytes);
      for (int j = 0; j < p.group_size; ++j) {
        const int q_col = (tc.h + j) * Tr::kHeadDim;
#pragma unroll
        for (int box = 0; box < Tr::kBoxes; ++box) {
          device::tma_load_3d(sm.q + box * Tr::kQBoxBytes + j * head_bytes, tail_map, q_full,
                              q_col + box * Tr::kBoxCols, tc.m0, tc.b);
        }
      }
    }
  }

  // The work tile's Q into L2 (an ordinary tile's boxes, as load_q reads them; a packed tail's rows are left to its
  // load). Its load then waits for L2 instead of memory.
  __device__ __forceinline__ static void prefetch_q(const CUtensorMap* qkv_map, const AttentionParams& p,
                                                    const TileCoord& tc, const Sm90Columns& cols) {
    if (tc.tail_rows != 0) return;
    int q_col, q_z;
    q_coords(p, tc, cols, &q_col, &q_z);
#pragma unroll
    for (int box = 0; box < Tr::kBoxes; ++box) {
#pragma unroll
      for (int r = 0; r < Tr::kBlockM / Tr::kBoxRows; ++r) {
        device::tma_prefetch_l2_3d(qkv_map, q_col + box * Tr::kBoxCols, tc.m0 + r * Tr::kBoxRows, q_z);
      }
    }
  }

  // One K or V tile (all of its column boxes) into `tile`, stage s of the ring in round `round`, once the stage is
  // free. Pipeline::producer_acquire's steps, with the stage and round computed once for the K and the V tile (as
  // a call, producer_acquire has the compiler recompute the round for each).
  // `map`: the packed buffer (z = the batch) or a cache's (z = batch * Hkv + kv head, col 0).
  __device__ __forceinline__ static void load_kv(const device::Pipeline<Tr::kStages>& pipe, uint32_t tile, int s,
                                                 int round, const CUtensorMap* map, int col, int n0, int z) {
    if (round > 0) device::mbar_wait(pipe.empty(s), uint32_t(round - 1) & 1u);
    const uint32_t full = pipe.full(s);
    device::mbar_arrive_expect_tx(full, Tr::kTileBytes);
#pragma unroll
    for (int box = 0; box < Tr::kBoxes; ++box) {
      device::tma_load_3d(tile + box * Tr::kBoxBytes, map, full, col + box * Tr::kBoxCols, n0, z);
    }
  }

  __device__ __forceinline__ static void run(const Sm90Smem<Tr>& sm, const CUtensorMap* qkv_map,
                                             const CUtensorMap* tail_map, const CUtensorMap* k_cache_map,
                                             const CUtensorMap* v_cache_map, const AttentionParams& p,
                                             const Sm90Columns& cols) {
    // The projection's (and the cache write's) ordinary stores before these TMA reads of them.
    device::fence_proxy_async_global();
    device::tma_prefetch_descriptor(qkv_map);
    device::tma_prefetch_descriptor(tail_map);
    if constexpr (kCached) {
      device::tma_prefetch_descriptor(k_cache_map);
      device::tma_prefetch_descriptor(v_cache_map);
    }
    const CUtensorMap* const k_map = kCached ? k_cache_map : qkv_map;
    const CUtensorMap* const v_map = kCached ? v_cache_map : qkv_map;
    const int kv_heads = p.num_q_heads / p.group_size;
    int it = 0;  // K/V tiles loaded so far: ring stage and phase
    // The producer decodes each tile into the consumers' slot as soon as it has it, and reads it back there when it
    // starts the tile (the grid has at most num_tiles CTAs, so the first tile exists).
    write_tile<kMask, kCached>(sm.tile_slot(0), persistent_tile(0), decode(p, persistent_tile(0)));
    for (int local = 0;; ++local) {
      if (local > 0) device::mbar_wait(sm.q_pipe.empty(0), sm.q_pipe.parity(local - 1));
      TileCoord tc;
      if (read_tile<kMask, kCached>(sm.tile_slot(local), p, &tc) >= p.num_tiles) {
        device::mbar_arrive(sm.q_pipe.full(0));  // no loads: the consumers read the slot and stop
        break;
      }
      load_q(sm, qkv_map, tail_map, p, tc, cols);
      const int k_col = kCached ? 0 : cols.k_col + tc.kvh * Tr::kHeadDim;
      const int v_col = kCached ? 0 : cols.v_col + tc.kvh * Tr::kHeadDim;
      const int kv_z = kCached ? tc.b * kv_heads + tc.kvh : tc.b;
      for (int nb = 0; nb < tc.n_blocks; ++nb, ++it) {
        const int n0 = key_tile<kMask, Tr::kBlockN>(tc, nb, 0).n0;
        const int s = sm.k_pipe.stage(it), round = it / Tr::kStages;
        const uint32_t k_tile = sm.k + s * Tr::kTileBytes, v_tile = sm.v + s * Tr::kTileBytes;
        load_kv(sm.k_pipe, k_tile, s, round, k_map, k_col, n0, kv_z);
        load_kv(sm.v_pipe, v_tile, s, round, v_map, v_col, n0, kv_z);
        if (it == 0 && p.l2_prefetch_bytes != 0) {  // behind this CTA's first loads
          device::bulk_prefetch_l2_share(p.l2_prefetch, p.l2_prefetch_bytes, blockIdx.x, gridDim.x);
        }
        if (nb == 0) {  // every work tile has a key tile (MaskPolicy's visited range is never empty)
          // The next tile is decoded into its slot behind this one's first key tile, off the path from the Q
          // barrier's release to the next Q load. Slot (local + 1) % 2 is free: the consumers read it at the start
          // of tile local - 1, before they released Q for this tile's load.
          const int next = persistent_tile(local + 1);
          TileCoord nc{};
          if (next < p.num_tiles) nc = decode(p, next);
          write_tile<kMask, kCached>(sm.tile_slot(local + 1), next, nc);
        }
        // The producer runs kStages key tiles ahead of the consumers: asked for here, the next Q has about
        // kStages + 2 key tiles of the consumers' work to arrive in L2 before its load. The tile is read back from
        // its slot: held in the producer's 24 registers across the loop, it would spill.
        if (nb == max(0, tc.n_blocks - 2)) {
          TileCoord nc;
          if (read_tile<kMask, kCached>(sm.tile_slot(local + 1), p, &nc) < p.num_tiles) {
            prefetch_q(qkv_map, p, nc, cols);
          }
        }
      }
    }
  }
};

}  // namespace gk::gemma3
