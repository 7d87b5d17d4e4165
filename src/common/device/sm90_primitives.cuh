// Hopper (sm_90a) primitives: mbarriers, TMA tensor loads, wgmma with shared-memory descriptors, and register
// reallocation between warpgroups. Thin wrappers over the PTX, so the kernels read as a schedule.
#pragma once

#include <cuda.h>
#include <cstdint>

#include "common/device/sm80_primitives.cuh"

namespace gk::device {

// ---- mbarrier --------------------------------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}

// Makes barrier initialization visible to the async proxy (TMA) before first use.
__device__ __forceinline__ void mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::); }

__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes));
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar));
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity));
}

// ---- TMA -------------------------------------------------------------------------------------------------------
// 3-D tiled load of the box at (c0, c1, c2) into shared memory; completes `bytes` on the barrier.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                            int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::
          "r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// 2-D tiled load of the box at (c0, c1).
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
          dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// 3-D tiled store of the shared-memory box at `src` to (c0, c1, c2); parts of the box outside the tensor are not
// written. Tracked by this thread's bulk async-group (bulk_commit_group, bulk_wait_read / bulk_wait_all).
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(map),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
// Staged output rows for TMA stores: two boxes of 64 rows x 64 bf16 columns (128 bytes a row), 1024-byte aligned, in
// the TMA's 128-byte swizzle. Byte address of 16-byte chunk c (0..15) of row r: box c / 8, chunk (c % 8) ^ (r % 8).
inline constexpr uint32_t kStagedBoxBytes = 64 * 128;
__device__ __forceinline__ uint32_t staged_chunk(uint32_t stage, int r, int c) {
  return stage + (c / 8) * kStagedBoxBytes + r * 128 + (((c % 8) ^ (r & 7)) << 4);
}

// Asks L2 for a 3-D tiled box of `map` at (c0, c1, c2), as tma_load_3d would read it; nothing lands in shared memory.
__device__ __forceinline__ void tma_prefetch_l2_3d(const CUtensorMap* map, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];\n" ::"l"(map), "r"(c0), "r"(c1),
               "r"(c2)
               : "memory");
}

// 2-D tiled store of the shared-memory box at `src` to (c0, c1); as tma_store_3d.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, uint32_t src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map), "r"(src),
               "r"(c0), "r"(c1)
               : "memory");
}
// 1-D bulk copy of `bytes` (a multiple of 16, both addresses 16-byte aligned) from global into this CTA's shared
// memory; completes the bytes on the barrier.
__device__ __forceinline__ void bulk_load_1d(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// This thread's committed bulk stores have finished reading shared memory (the source may be overwritten).
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
// ... and have completed their writes.
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// Asks L2 to fetch [p, p + bytes) from memory without bringing it to this SM (p and bytes multiples of 16).
// Nothing waits for it: a hint for data a later kernel will read.
__device__ __forceinline__ void bulk_prefetch_l2(const void* p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
}

// CTA `cta` of `ctas`: its even share (in 16-byte units) of [base, base + bytes), prefetched into L2 by the calling
// thread in requests of 32 KB.
__device__ __forceinline__ void bulk_prefetch_l2_share(const void* base, uint64_t bytes, uint64_t cta, uint64_t ctas) {
  const uint64_t units = bytes / 16;
  const uint64_t u0 = units * cta / ctas, u1 = units * (cta + 1) / ctas;
  constexpr uint64_t kChunk = 32768 / 16;
  for (uint64_t u = u0; u < u1; u += kChunk) {
    const uint64_t n = u1 - u < kChunk ? u1 - u : kChunk;
    bulk_prefetch_l2(static_cast<const char*>(base) + u * 16, static_cast<uint32_t>(n * 16));
  }
}

__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

// Programmatic dependent launch. A kernel launched with programmatic stream serialization may start while the
// previous kernel in its stream still runs; grid_dependency_wait() blocks until that kernel has completed and its
// memory is visible (a no-op in a kernel launched without the attribute). launch_dependents() lets the next
// kernel be scheduled before this one ends.
__device__ __forceinline__ void grid_dependency_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// Orders this thread's generic-proxy global-memory accesses with its later async-proxy ones (TMA loads of data
// another kernel wrote).
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

// Orders this thread's generic-proxy shared-memory writes before later async-proxy reads (wgmma, TMA store).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// ---- thread-block clusters -------------------------------------------------------------------------------------
// All threads of every CTA in the cluster; release/acquire order shared-memory writes before remote reads.
// The .aligned forms need the whole warp converged: a producer warp arrives here after a loop run by one lane.
__device__ __forceinline__ void cluster_sync() {
  __syncwarp();
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
}

__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// The address of `addr` (this CTA's shared memory) in the shared memory of cluster rank `rank`.
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}

__device__ __forceinline__ float4 ld_cluster_f32x4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// ---- named barriers (id 0 is __syncthreads) ------------------------------------------------------------------
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// bar.sync that also ANDs `pred` over the participating threads (every one gets the result).
__device__ __forceinline__ bool named_barrier_and(int id, int threads, bool pred) {
  uint32_t r;
  asm volatile(
      "{\n"
      ".reg .pred p, q;\n"
      "setp.ne.u32 p, %1, 0;\n"
      "barrier.cta.red.and.pred q, %2, %3, p;\n"
      "selp.u32 %0, 1, 0, q;\n"
      "}\n"
      : "=r"(r)
      : "r"(uint32_t(pred)), "r"(id), "r"(threads)
      : "memory");
  return r != 0;
}

__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- output staging for TMA stores (staged_chunk's layout) -------------------------------------------------------
// A thread's share of a warpgroup's 64 rows of kTiles n8 tiles (kTiles * 8 columns) into a staging buffer, straight
// from the mma accumulator layout: `pair(j, hr)` is the thread's finished bf16 pair of n8 tile j (columns 8 j + 2 t4,
// + 1) in row r_lo + 8 hr. In the swizzle each quad's 16 bytes of a row land in a different chunk, so a warp's
// writes are free of bank conflicts.
template <int kTiles, class Pair>
__device__ __forceinline__ void staged_write_rows(uint32_t stage, int r_lo, int t4, const Pair& pair) {
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
#pragma unroll
    for (int j = 0; j < kTiles; ++j) st_shared_b32(staged_chunk(stage, r_lo + 8 * hr, j) + t4 * 4, pair(j, hr));
  }
}

// One warpgroup's 64 rows of a 128-column head into its own staging buffer (staged_write_rows). The buffer is free
// once the warpgroup's previous bulk stores have read it: its first thread waits for that before named barrier
// `barrier` (the warpgroup's 128 threads).
template <class Pair>
__device__ __forceinline__ void staged_write_head(uint32_t stage, int barrier, int r_lo, int t4, const Pair& pair) {
  if (threadIdx.x % 128 == 0) bulk_wait_read();
  named_barrier_sync(barrier, 128);
  staged_write_rows<16>(stage, r_lo, t4, pair);
}

// The staged writes made visible to the TMA unit: after this, the warpgroup's first thread may issue the stores.
__device__ __forceinline__ void staged_publish(int barrier) {
  fence_proxy_async_shared();
  named_barrier_sync(barrier, 128);
}

// ---- register reallocation -------------------------------------------------------------------------------------
template <int kRegs>
__device__ __forceinline__ void regs_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

template <int kRegs>
__device__ __forceinline__ void regs_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// ---- wgmma -----------------------------------------------------------------------------------------------------
// Shared-memory matrix descriptor for a tile stored with the 128-byte swizzle that TMA writes (8 rows of 128 bytes
// per 1024-byte atom). `lbo`/`sbo` in bytes: for a K-major operand sbo is the stride between 8-row groups (lbo
// unused); for an MN-major operand lbo is the stride between 64-element column blocks and sbo the stride between
// 8-row groups along K.
__device__ __forceinline__ uint64_t smem_desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  uint64_t d = 0;
  d |= uint64_t((addr & 0x3FFFF) >> 4);
  d |= uint64_t((lbo & 0x3FFFF) >> 4) << 16;
  d |= uint64_t((sbo & 0x3FFFF) >> 4) << 32;
  d |= uint64_t(1) << 62;  // 128-byte swizzle
  return d;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accumulator reads/writes across an asynchronous wgmma.
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    asm volatile("" : "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])::"memory");
  }
}

#define GK_WGMMA_D64                                                                                              \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "  \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

#define GK_WGMMA_D64_OPERANDS(d)                                                                                  \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),          \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),      \
      "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),      \
      "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),      \
      "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),      \
      "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),    \
      "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),               \
      "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]),               \
      "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),               \
      "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])

// D[64x128] (+)= A[64x16] * B[16x128]; A and B K-major in shared memory. The accumulator layout per thread is the
// mma.sync m16n8 one repeated over 16 n8 tiles: d[j] = rows (g, g+8) of the warp's 16, columns 8j + 2t, +1.
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b,
                                                    int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " GK_WGMMA_D64 ", %64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : GK_WGMMA_D64_OPERANDS(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D[64x128] (+)= A[64x16] * B[16x128] in fp16 (fp32 accumulation); A and B K-major in shared memory, the
// accumulator layout of wgmma_m64n128k16_ss.
__device__ __forceinline__ void wgmma_m64n128k16_f16_ss(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b,
                                                        int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " GK_WGMMA_D64 ", %64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : GK_WGMMA_D64_OPERANDS(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

#define GK_WGMMA_D32                                                                                              \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31}"

// D[64x64] (+)= A[64x16] * B[16x64]; A and B K-major in shared memory; the accumulator layout of
// wgmma_m64n128k16_ss over 8 n8 tiles.
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b,
                                                   int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " GK_WGMMA_D32 ", %32, %33, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D[64x128] += A[64x16] * B[16x128]; A from registers (the mma.sync m16n8k16 A fragment of each warp's 16 rows),
// B MN-major in shared memory (transposed read).
__device__ __forceinline__ void wgmma_m64n128k16_rs_tb(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc_b,
                                                       int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " GK_WGMMA_D64 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n"
      "}\n"
      : GK_WGMMA_D64_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

// D[64x128] += A[64x8] * B[8x128], tf32 inputs (the hardware ignores the low 13 mantissa bits: callers round),
// fp32 accumulation; A and B K-major in shared memory (tf32 has no transposed form).
__device__ __forceinline__ void wgmma_m64n128k8_tf32_ss(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 " GK_WGMMA_D64 ", %64, %65, 1, 1, 1;\n"
               : GK_WGMMA_D64_OPERANDS(d)
               : "l"(desc_a), "l"(desc_b));
}

// The same with the accumulator's input switchable: accumulate == 0 starts a fresh sum (D = A * B) without the
// accumulator registers being written by ordinary instructions first.
__device__ __forceinline__ void wgmma_m64n128k8_tf32_ss(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b,
                                                        int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 " GK_WGMMA_D64 ", %64, %65, p, 1, 1;\n"
      "}\n"
      : GK_WGMMA_D64_OPERANDS(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D[64x128] += A[64x8] * B[8x128], tf32 (callers round), A from registers in the mma.sync m16n8k8 tf32 A layout
// (a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4) of each warp's 16 rows), B K-major in shared memory.
__device__ __forceinline__ void wgmma_m64n128k8_tf32_rs(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 " GK_WGMMA_D64
               ", {%64, %65, %66, %67}, %68, 1, 1, 1;\n"
               : GK_WGMMA_D64_OPERANDS(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

#undef GK_WGMMA_D64
#undef GK_WGMMA_D64_OPERANDS

}  // namespace gk::device
