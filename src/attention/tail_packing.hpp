// Packed GQA tails (the Hopper attention kernel): the last, partial query block of every query head of one kv
// group shares one work tile, each head's rows rounded up to a multiple of 8 (so each head's rows start on a
// 1024-byte swizzle atom in shared memory). Host and device code share these (constexpr: the CUDA build relaxes
// constexpr across the host/device boundary), and the host tests check them exhaustively.
#pragma once

namespace gk::gemma3 {

// Rows per head of the packed tail for this shape, or 0 when the tails stay one tile per head: no partial block,
// no sharing (group_size 1), or the group's rounded tails do not fit a block of `block_m` rows.
constexpr int packed_tail_rows(int seq_len, int group_size, int block_m) {
  const int r = block_m > 0 ? seq_len % block_m : 0, r8 = (r + 7) / 8 * 8;
  return (r == 0 || group_size < 2 || group_size * r8 > block_m) ? 0 : r8;
}

// Row i of a packed tail belongs to head i / tail_rows; the kernels divide by multiplying with
// ceil(2^16 / tail_rows), which is exact for i < 256 and tail_rows a multiple of 8 up to 128. 0 when not packed.
constexpr int tail_reciprocal(int tail_rows) { return tail_rows > 0 ? (65536 + tail_rows - 1) / tail_rows : 0; }
constexpr int tail_quotient(int i, int reciprocal) { return (i * reciprocal) >> 16; }

}  // namespace gk::gemma3
