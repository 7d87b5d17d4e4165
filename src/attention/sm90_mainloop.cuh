// The Hopper attention kernel's consumer mainloop: the tensor-core side of a consumer warpgroup (64 query rows).
// S = Q K^T with wgmma, both operands from shared memory; O += P V with wgmma taking P straight from registers and V
// from shared memory read transposed. The two consumer warpgroups take turns issuing their tensor-core work (named
// barriers 1 and 2), so one's softmax runs while the other's GEMMs occupy the tensor cores. Within a warpgroup, the
// softmax of key tile j overlaps its own P*V of tile j-1 (the kernel's loop: attention_sm90.cuh). Both warpgroups
// take the same number of turns per work tile, so the alternation carries over from one work tile to the next.
#pragma once

#include "common/device/sm90_primitives.cuh"
#include "attention/sm90_traits.cuh"

namespace gk::gemma3 {

template <class Tr>
struct Sm90Mainloop {
  static constexpr int kSchedThreads = 2 * 128;  // the two consumer warpgroups
  // The barriers, by value: the mainloop's state stays in registers.
  const device::Pipeline<1> q_pipe;
  const device::Pipeline<Tr::kStages> k_pipe, v_pipe;
  const int half_block;  // which 64 rows of the block this warpgroup owns
  const int lane;
  const uint64_t q_desc, k_desc, v_desc;
  const uint32_t v_smem;  // the V ring's shared address (clear_v_rows)
  const int my_turn, other_turn;

  // Shared-memory descriptors are built once; a tile, stage or k-step offset is then a plain add to the address
  // field (addresses stay below 256 KB, so the 14-bit field never carries). Rebuilding each from its address cost
  // integer and uniform instructions in the loop without moving the time (docs/perf-log.md v6.3).
  __device__ __forceinline__ Sm90Mainloop(const Sm90Smem<Tr>& smem, int half, int lane_)
      : q_pipe(smem.q_pipe),
        k_pipe(smem.k_pipe),
        v_pipe(smem.v_pipe),
        half_block(half),
        lane(lane_),
        // This warpgroup's rows start kConsumerRows rows into each Q column box.
        q_desc(device::smem_desc_sw128(smem.q + half * Tr::kConsumerRows * Tr::kBoxRowBytes, 16, 1024)),
        k_desc(device::smem_desc_sw128(smem.k, 16, 1024)),
        // V is [keys][dims], dims contiguous: an MN-major B operand whose next kBoxCols dims sit one box further.
        v_desc(device::smem_desc_sw128(smem.v, Tr::kBoxBytes, 1024)),
        v_smem(smem.v),
        my_turn(1 + half),
        other_turn(2 - half) {}

  __device__ __forceinline__ static uint64_t desc_at(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

  // The first half goes first.
  __device__ __forceinline__ void start_turns() const {
    if (half_block == 1) device::named_barrier_arrive(other_turn, kSchedThreads);
  }
  __device__ __forceinline__ void take_turn() const { device::named_barrier_sync(my_turn, kSchedThreads); }
  __device__ __forceinline__ void pass_turn() const { device::named_barrier_arrive(other_turn, kSchedThreads); }

  // S = Q K^T of ring use g (K/V tiles are counted across the CTA's work tiles, as the producer counts them).
  __device__ __forceinline__ void issue_qk(float (&acc_s)[Tr::kNTiles][4], int g) const {
    const uint64_t k_tile = desc_at(k_desc, k_pipe.stage(g) * Tr::kTileBytes);
    k_pipe.consumer_wait(g);
    device::wgmma_fence();
#pragma unroll
    for (int k = 0; k < Tr::kKSteps; ++k) {
      // 16 columns = 32 bytes along the swizzled row; each box holds kBoxCols / 16 steps.
      constexpr int kStepsPerBox = Tr::kBoxCols / 16;
      const uint32_t step = (k % kStepsPerBox) * 32;
      const uint64_t a = desc_at(q_desc, (k / kStepsPerBox) * Tr::kQBoxBytes + step);
      const uint64_t b = desc_at(k_tile, (k / kStepsPerBox) * Tr::kBoxBytes + step);
      if constexpr (Tr::kBlockN == 128) {
        device::wgmma_m64n128k16_ss(acc_s, a, b, k > 0);
      } else {
        device::wgmma_m64n64k16_ss(acc_s, a, b, k > 0);
      }
    }
    device::wgmma_commit();
  }

  // Rows from `first_row` on of ring use g's V tile to zeros, by this warpgroup's 128 threads: keys past a cache's
  // length that the cache holds (its unused slots may hold anything, Inf and NaN too, and probability 0 times NaN is
  // NaN). Whole 128-byte rows, so the swizzle does not matter. The writes reach the tensor cores' reads through the
  // async-proxy fence, this warpgroup's barrier, and for the other warpgroup the turn barrier after this turn.
  __device__ __forceinline__ void clear_v_rows(int g, int first_row) const {
    const uint32_t tile = v_smem + v_pipe.stage(g) * Tr::kTileBytes;
    const int rows = Tr::kBlockN - first_row, chunks = Tr::kBoxes * rows * 8;
    for (int i = threadIdx.x % 128; i < chunks; i += 128) {
      const int box = i / (rows * 8), r = (i / 8) % rows, c = i % 8;
      device::st_shared_v4(tile + box * Tr::kBoxBytes + (first_row + r) * Tr::kBoxRowBytes + c * 16,
                           make_uint4(0u, 0u, 0u, 0u));
    }
    device::fence_proxy_async_shared();
    device::named_barrier_sync(3 + half_block, 128);
  }

  // O += P V of ring use g: per 16 keys, one m64n128k16 per 128 output columns (two column boxes of V further).
  // clear_from < kBlockN: the tile's rows from there on are zeroed first (clear_v_rows).
  __device__ __forceinline__ void issue_pv(float (&acc_o)[Tr::kDTiles][4], const uint32_t (&p_frag)[Tr::kNTiles / 2][4],
                                           int g, int clear_from = Tr::kBlockN) const {
    const uint64_t v_tile = desc_at(v_desc, v_pipe.stage(g) * Tr::kTileBytes);
    v_pipe.consumer_wait(g);
    if (clear_from < Tr::kBlockN) clear_v_rows(g, clear_from);
    device::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Tr::kBlockN / 16; ++kk) {
#pragma unroll
      for (int c = 0; c < Tr::kDTiles / 16; ++c) {
        // 16 keys = 16 box rows down the tile; 128 columns = two column boxes.
        auto& acc = *reinterpret_cast<float(*)[16][4]>(&acc_o[16 * c]);
        device::wgmma_m64n128k16_rs_tb(acc, p_frag[kk],
                                       desc_at(v_tile, c * 2 * Tr::kBoxBytes + kk * 16 * Tr::kBoxRowBytes), 1);
      }
    }
    device::wgmma_commit();
  }

  __device__ __forceinline__ void release(uint32_t empty_bar) const {
    if (lane == 0) device::mbar_arrive(empty_bar);
  }
  // After the Q K^T of key tile nb of n_blocks (ring use g0 + nb): its K stage is free, and Q too (for the next work
  // tile's load) after the last.
  __device__ __forceinline__ void release_k(int g0, int nb, int n_blocks) const {
    release(k_pipe.empty(k_pipe.stage(g0 + nb)));
    if (nb == n_blocks - 1) release(q_pipe.empty(0));
  }
  __device__ __forceinline__ void release_v(int g) const { release(v_pipe.empty(v_pipe.stage(g))); }

  // The first key tile's turn: its S only.
  __device__ __forceinline__ void first_qk(float (&acc_s)[Tr::kNTiles][4], int g0, int n_blocks) const {
    take_turn();
    issue_qk(acc_s, g0);
    pass_turn();
    device::wgmma_wait<0>();
    device::fence_accumulators(acc_s);
    release_k(g0, 0, n_blocks);
  }

  // Key tile nb's turn: its S, then the previous tile's P*V, which may still run when this returns.
  // clear_from: issue_pv's, for the previous tile.
  __device__ __forceinline__ void next_qk_prev_pv(float (&acc_s)[Tr::kNTiles][4], float (&acc_o)[Tr::kDTiles][4],
                                                  const uint32_t (&p_frag)[Tr::kNTiles / 2][4], int g0, int nb,
                                                  int n_blocks, int clear_from = Tr::kBlockN) const {
    take_turn();
    issue_qk(acc_s, g0 + nb);
    issue_pv(acc_o, p_frag, g0 + nb - 1, clear_from);
    pass_turn();
    device::wgmma_wait<1>();  // S of tile nb is ready; P*V of tile nb-1 may still run
    device::fence_accumulators(acc_s);
    release_k(g0, nb, n_blocks);
  }

  // The previous tile's P*V done (ring use g).
  __device__ __forceinline__ void wait_pv(float (&acc_o)[Tr::kDTiles][4], int g) const {
    device::wgmma_wait<0>();
    device::fence_accumulators(acc_o);
    release_v(g);
  }

  // The last key tile's turn: its P*V only, waited for.
  __device__ __forceinline__ void last_pv(float (&acc_o)[Tr::kDTiles][4], const uint32_t (&p_frag)[Tr::kNTiles / 2][4],
                                          int g, int clear_from = Tr::kBlockN) const {
    take_turn();
    issue_pv(acc_o, p_frag, g, clear_from);
    pass_turn();
    wait_pv(acc_o, g);
  }
};

}  // namespace gk::gemma3
