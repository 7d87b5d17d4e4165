// Hopper (sm_90a) primitives of the persistent head-tiled GEMM (head_gemm_sm90.cuh): TMA loads multicast over a
// thread-block cluster, mbarrier arrivals on a peer CTA's barrier, and the 64 x 256 wgmma shapes (bf16 or fp16 with
// both operands in shared memory; tf32 with A from registers). The accumulator layout is sm90_primitives.cuh's
// m64n128 one over 32 n8 tiles: d[j] = rows (g, g+8) of the warp's 16, columns 8j + 2t, +1.
#pragma once

#include <cuda.h>
#include <cstdint>

namespace gk::device {

// The box at (c0, c1) lands at `dst` in every CTA of the cluster named in `cta_mask` (same shared-memory offset in
// each) and completes its bytes on each destination's barrier at `bar`.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0,
                                                      int c1, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1), "h"(cta_mask)
      : "memory");
}

// One arrival on the mbarrier at `cluster_addr`: this CTA's or a peer's, as cluster_map() gives it. Used to free a
// ring stage that only the tensor cores read (their completion is waited for first), so the default .cta release
// suffices; the .cluster form costs a MEMBAR.GPU per arrival.
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}

// Keeps registers that an in-flight wgmma reads (an A fragment) alive and unmoved up to this point: place it after
// the wgmma_wait that retires the reading group.
template <int N>
__device__ __forceinline__ void fence_fragment(uint32_t (&a)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(a[i])::"memory");
}


#define GK_WGMMA_D128 \
  "{" \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
  "}"

#define GK_WGMMA_D128_OPERANDS(d) \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), \
  "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), \
  "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
  "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), \
  "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), \
  "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), \
  "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), \
  "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]), \
  "+f"(d[16][0]), "+f"(d[16][1]), "+f"(d[16][2]), "+f"(d[16][3]), "+f"(d[17][0]), "+f"(d[17][1]), "+f"(d[17][2]), "+f"(d[17][3]), \
  "+f"(d[18][0]), "+f"(d[18][1]), "+f"(d[18][2]), "+f"(d[18][3]), "+f"(d[19][0]), "+f"(d[19][1]), "+f"(d[19][2]), "+f"(d[19][3]), \
  "+f"(d[20][0]), "+f"(d[20][1]), "+f"(d[20][2]), "+f"(d[20][3]), "+f"(d[21][0]), "+f"(d[21][1]), "+f"(d[21][2]), "+f"(d[21][3]), \
  "+f"(d[22][0]), "+f"(d[22][1]), "+f"(d[22][2]), "+f"(d[22][3]), "+f"(d[23][0]), "+f"(d[23][1]), "+f"(d[23][2]), "+f"(d[23][3]), \
  "+f"(d[24][0]), "+f"(d[24][1]), "+f"(d[24][2]), "+f"(d[24][3]), "+f"(d[25][0]), "+f"(d[25][1]), "+f"(d[25][2]), "+f"(d[25][3]), \
  "+f"(d[26][0]), "+f"(d[26][1]), "+f"(d[26][2]), "+f"(d[26][3]), "+f"(d[27][0]), "+f"(d[27][1]), "+f"(d[27][2]), "+f"(d[27][3]), \
  "+f"(d[28][0]), "+f"(d[28][1]), "+f"(d[28][2]), "+f"(d[28][3]), "+f"(d[29][0]), "+f"(d[29][1]), "+f"(d[29][2]), "+f"(d[29][3]), \
  "+f"(d[30][0]), "+f"(d[30][1]), "+f"(d[30][2]), "+f"(d[30][3]), "+f"(d[31][0]), "+f"(d[31][1]), "+f"(d[31][2]), "+f"(d[31][3])

// D[64x256] (+)= A[64x16] * B[16x256], bf16, both K-major in shared memory; accumulate == 0 starts a fresh sum.
__device__ __forceinline__ void wgmma_m64n256k16_ss(float (&d)[32][4], uint64_t desc_a, uint64_t desc_b,
                                                    int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " GK_WGMMA_D128 ", %128, %129, p, 1, 1, 0, 0;\n"
      "}\n"
      : GK_WGMMA_D128_OPERANDS(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// The same in fp16 (fp32 accumulation): the audio fp16 kernel's two-head tile (qkv_f16_splitk_sm90.cuh).
__device__ __forceinline__ void wgmma_m64n256k16_f16_ss(float (&d)[32][4], uint64_t desc_a, uint64_t desc_b,
                                                        int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " GK_WGMMA_D128 ", %128, %129, p, 1, 1, 0, 0;\n"
      "}\n"
      : GK_WGMMA_D128_OPERANDS(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D[64x256] (+)= A[64x8] * B[8x256], tf32 (the hardware ignores the low 13 mantissa bits: callers round), A from
// registers (each warp's 16 rows in the mma.sync m16n8k8 tf32 A layout: a0 (g, t), a1 (g+8, t), a2 (g, t+4),
// a3 (g+8, t+4)), B K-major in shared memory.
__device__ __forceinline__ void wgmma_m64n256k8_tf32_rs(float (&d)[32][4], const uint32_t (&a)[4], uint64_t desc_b,
                                                        int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " GK_WGMMA_D128 ", {%128, %129, %130, %131}, %132, p, 1, 1;\n"
      "}\n"
      : GK_WGMMA_D128_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

#undef GK_WGMMA_D128
#undef GK_WGMMA_D128_OPERANDS

}  // namespace gk::device
