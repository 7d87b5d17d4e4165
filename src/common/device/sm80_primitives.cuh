// Warp-level tensor-core and async-copy primitives (sm_80 ISA, valid on sm_90a): shared-memory accesses by
// address, ldmatrix, mma.sync bf16, cp.async with zero fill, and single-instruction special functions. Thin
// wrappers so the kernels read as math.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

namespace gk::device {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The first 1024-byte aligned shared address at or after `p`: 128-byte swizzle atoms (TMA boxes, wgmma operands)
// need that alignment, which dynamic shared memory does not promise (callers reserve 1 KB of slack).
__device__ __forceinline__ uint32_t smem_base_1024(const void* p) { return (smem_addr(p) + 1023u) & ~1023u; }

// Plain shared-memory accesses by 32-bit shared address (as smem_addr returns and the swizzle arithmetic uses).
__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ void st_shared_v2_f32(uint32_t addr, float a, float b) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(a), "f"(b) : "memory");
}

__device__ __forceinline__ void st_shared_v4(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// 16-byte global->shared copy; when `valid` is false the 16 bytes are zero-filled and global memory is not read.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D = A(16x16, row) * B(16x8, col) + D, bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// x rounded to the nearest bf16, kept in fp32: where a bf16 torch program would store an intermediate.
__device__ __forceinline__ float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

// x (fp32 bits) rounded to the nearest tf32, ties away from zero, as far as the tensor cores see it: they ignore
// the low 13 bits, so adding half of the last kept bit is enough and the low bits are left as they fall. Inf and
// NaN skip the add (on a NaN with high payload bits it would carry into the sign: 0x7fffffff + 0x1000 reads as
// -0) and go through a float add instead, which keeps Inf and makes every NaN the canonical one: a NaN whose
// payload lies only in the low 13 bits (0x7f800001..0x7f801fff) would otherwise read as Inf. cvt.rna.tf32.f32 has
// that gap: on sm_90 it compiles to the guarded add and a mask of the low bits, which turns such a NaN into Inf.
__device__ __forceinline__ uint32_t round_tf32_for_mma(uint32_t x) {
  // In place on one register (b32 operands take both integer and float instructions), so ptxas emits three
  // instructions: the compare and two predicated adds.
  asm("{\n"
      ".reg .pred finite;\n"
      ".reg .f32 a;\n"
      "abs.f32 a, %0;\n"
      "setp.lt.f32 finite, a, 0f7F800000;\n"  // false for Inf and NaN
      "@finite add.u32 %0, %0, 0x1000;\n"
      "@!finite add.f32 %0, %0, %0;\n"
      "}\n"
      : "+r"(x));
  return x;
}

// x rounded to the nearest tf32 value (ties away from zero), low 13 bits cleared, for arithmetic on the rounded
// value itself (the 3xTF32 split); Inf stays Inf, NaN stays NaN (round_tf32_for_mma).
__device__ __forceinline__ float round_tf32(float x) {
  return __uint_as_float(round_tf32_for_mma(__float_as_uint(x)) & 0xffffe000u);
}

// The 3xTF32 split's small part: x - big (big = round_tf32(x)) rounded to tf32; zero where big is not finite (Inf
// inputs, or finite ones whose rounding overflows), so an infinite input gives an infinite product as in fp32
// rather than Inf - Inf = NaN. Where big is finite, x - big is exact and within half a tf32 ulp of big, so rounding
// it needs no Inf or NaN guard: the bare add and mask.
__device__ __forceinline__ float tf32_small_part(float x, float big) {
  const uint32_t d = __float_as_uint(x - big);
  return isfinite(big) ? __uint_as_float((d + 0x1000u) & 0xffffe000u) : 0.f;
}

// The largest |x[i]| (fp32 bits), NaN if any element is NaN: a tree of NaN-propagating maxima (max.NaN), so one
// compare of the result tells whether every element is finite.
template <int N>
__device__ __forceinline__ float max_abs_nan(const uint32_t (&x)[N]) {
  float m[N];
#pragma unroll
  for (int i = 0; i < N; ++i) m[i] = fabsf(__uint_as_float(x[i]));
#pragma unroll
  for (int s = 1; s < N; s *= 2) {
#pragma unroll
    for (int i = 0; i + s < N; i += 2 * s) asm("max.NaN.f32 %0, %0, %1;\n" : "+f"(m[i]) : "f"(m[i + s]));
  }
  return m[0];
}

// round_tf32_for_mma on every element: where all are finite (the common case, one compare for the lot) the bare
// add, two instructions per element with the shared maximum instead of three; otherwise element by element.
template <int N>
__device__ __forceinline__ void round_tf32_for_mma(uint32_t (&x)[N]) {
  if (__builtin_expect(max_abs_nan(x) < __int_as_float(0x7f800000), 1)) {
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] += 0x1000u;
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] = round_tf32_for_mma(x[i]);
  }
}
// Four fp32 values (bits) at once, as the rounding passes move them.
__device__ __forceinline__ uint4 round_tf32_for_mma(uint4 v) {
  uint32_t x[4] = {v.x, v.y, v.z, v.w};
  round_tf32_for_mma(x);
  return make_uint4(x[0], x[1], x[2], x[3]);
}

// kBytes of shared memory from `start` (16-byte aligned) rounded in place for the tensor cores by kThreads
// threads (t: 0..kThreads-1), 16-byte chunks in batches of kBatch per thread: a batch's loads all go out before
// its first store, and each group of four chunks (16 values) takes one finiteness check.
template <uint32_t kBytes, int kThreads, int kBatch>
__device__ __forceinline__ void round_tf32_smem(uint32_t start, int t) {
  static_assert(kBytes % 16 == 0, "whole 16-byte chunks");
  constexpr int kChunks = kBytes / 16, kPer = (kChunks + kThreads - 1) / kThreads;
  constexpr bool kExact = kChunks % kThreads == 0 && kPer % kBatch == 0;  // no chunk past the end: no guards
  static_assert(kBatch % 4 == 0, "whole groups of four chunks");
#pragma unroll 1
  for (int j0 = 0; j0 < kPer; j0 += kBatch) {
    uint32_t e[4 * kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int c = t + kThreads * (j0 + j);
      const uint4 v = kExact || c < kChunks ? ld_shared_v4(start + 16u * c) : make_uint4(0, 0, 0, 0);
      e[4 * j] = v.x;
      e[4 * j + 1] = v.y;
      e[4 * j + 2] = v.z;
      e[4 * j + 3] = v.w;
    }
#pragma unroll
    for (int q = 0; q < kBatch / 4; ++q) {
      uint32_t g[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) g[i] = e[16 * q + i];
      round_tf32_for_mma(g);
#pragma unroll
      for (int i = 0; i < 16; ++i) e[16 * q + i] = g[i];
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int c = t + kThreads * (j0 + j);
      if (kExact || c < kChunks) {
        st_shared_v4(start + 16u * c, make_uint4(e[4 * j], e[4 * j + 1], e[4 * j + 2], e[4 * j + 3]));
      }
    }
  }
}

__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t bf16x2_bits(__nv_bfloat162 v) { return *reinterpret_cast<uint32_t*>(&v); }
__device__ __forceinline__ __nv_bfloat162 bf16x2(uint32_t bits) { return *reinterpret_cast<__nv_bfloat162*>(&bits); }
// A bf16 pair's bits as two floats (exact: a bf16 is the top half of an fp32).
__device__ __forceinline__ float2 unpack_bf16x2(uint32_t bits) { return __bfloat1622float2(bf16x2(bits)); }

// RoPE of a pair of bf16 dims: y * cos + partner * sin, `sin` carrying rotate_half's sign (negated for the dims
// below D / 2). Bit-identical to rounding each fp32 product and their sum to bf16 (why: norm_rope.cu's finish);
// the _rn forms are never contracted into an fma, which would skip a rounding.
__device__ __forceinline__ uint32_t rope_bf16x2(uint32_t y, uint32_t partner, uint32_t cos, uint32_t sin) {
  return bf16x2_bits(__hadd2_rn(__hmul2_rn(bf16x2(y), bf16x2(cos)), __hmul2_rn(bf16x2(partner), bf16x2(sin))));
}

}  // namespace gk::device
