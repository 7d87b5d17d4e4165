// Whether a CUTLASS 3 (sm90, TMA + wgmma, warp-specialized, persistent) bf16 GEMM reaches cuBLASLt's kernels on the
// 047 layer's plain projection shapes: q|k|v as one GEMM (N = (Hq + 2 Hkv) D = 5120) and O (N = hidden = 3072),
// K = 3072, at every distinct M = B*S of the suite. If one does, a GEMM with the norm and RoPE in its epilogue can
// be built on that mainloop (the project's own head GEMM stays ~15% behind cuBLASLt: docs/perf-log.md v7-v9).
//
// Protocol as gk_micro_gemm_algos: a 120 MiB memset scrub before every iteration, CUDA events around the GEMM alone,
// median of 30 after 5 warm-up; the candidates alternate within each iteration so clock drift hits them alike.
//
//   build/bin/gk_micro_cutlass_gemm            (one line per shape: cuBLASLt's first answer, then each CUTLASS form)
//   build/bin/gk_micro_cutlass_gemm M N FORM   (one form, five launches: for ncu)
// Built only with -DGK_CUTLASS_INCLUDE (tools/CMakeLists.txt).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "check_lt.hpp"
#include "median.hpp"

// A named namespace: nvcc's host stubs for kernels templated on types from an anonymous namespace do not compile.
namespace cutlass_probe {

using namespace cute;
using gk_micro::median;

// D[M, N] = A[M, K] * W[N, K]^T: A row-major, B = W^T column-major, D row-major; no C operand.
template <class TileShape, class ClusterShape, class KernelSchedule, class EpilogueSchedule>
struct CutlassGemm {
  using Element = cutlass::bfloat16_t;
  static constexpr int kAlign = 8;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::RowMajor, kAlign, Element,
      cutlass::layout::RowMajor, kAlign, EpilogueSchedule>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, kAlign, Element,
      cutlass::layout::ColumnMajor, kAlign, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  Gemm gemm;
  // Prepares the launch once (outside the timed region); returns false when CUTLASS rejects the shape.
  bool init(int m, int n, int k, const void* a, const void* w, void* d, void* ws, size_t ws_bytes) {
    using StrideA = typename Kernel::StrideA;
    using StrideB = typename Kernel::StrideB;
    using StrideD = typename Kernel::StrideD;
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, k, 1},
        {static_cast<const Element*>(a), cutlass::make_cute_packed_stride(StrideA{}, {m, k, 1}),
         static_cast<const Element*>(w), cutlass::make_cute_packed_stride(StrideB{}, {n, k, 1})},
        {{1.f, 0.f}, nullptr, {}, static_cast<Element*>(d), cutlass::make_cute_packed_stride(StrideD{}, {m, n, 1})},
        hw};
    if (gemm.can_implement(args) != cutlass::Status::kSuccess) return false;
    if (Gemm::get_workspace_size(args) > ws_bytes) return false;
    return gemm.initialize(args, ws) == cutlass::Status::kSuccess;
  }
  bool run() { return gemm.run() == cutlass::Status::kSuccess; }
};

using Coop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using CoopEpi = cutlass::epilogue::TmaWarpSpecializedCooperative;
using Ping = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using PingEpi = cutlass::epilogue::TmaWarpSpecialized;

using G128x256c2x1 = CutlassGemm<Shape<_128, _256, _64>, Shape<_2, _1, _1>, Coop, CoopEpi>;
using G128x256c1x2 = CutlassGemm<Shape<_128, _256, _64>, Shape<_1, _2, _1>, Coop, CoopEpi>;
using G256x128c1x2 = CutlassGemm<Shape<_256, _128, _64>, Shape<_1, _2, _1>, Coop, CoopEpi>;
using G128x128p1x2 = CutlassGemm<Shape<_128, _128, _64>, Shape<_1, _2, _1>, Ping, PingEpi>;
using G64x256p1x1 = CutlassGemm<Shape<_64, _256, _64>, Shape<_1, _1, _1>, Ping, PingEpi>;

// The CUTLASS forms by index (0 .. kForms - 1).
constexpr int kForms = 5;
const char* const kFormNames[kForms] = {"128x256 c2x1 coop", "128x256 c1x2 coop", "256x128 c1x2 coop",
                                        "128x128 c1x2 ping", "64x256 c1x1 ping"};
struct Forms {
  G128x256c2x1 g0;
  G128x256c1x2 g1;
  G256x128c1x2 g2;
  G128x128p1x2 g3;
  G64x256p1x1 g4;
  template <class F>
  bool with(int f, F&& fn) {
    switch (f) {
      case 0: return fn(g0);
      case 1: return fn(g1);
      case 2: return fn(g2);
      case 3: return fn(g3);
      case 4: return fn(g4);
      default: return false;
    }
  }
  bool init(int f, int m, int n, int k, const void* a, const void* w, void* d, void* ws, size_t ws_bytes) {
    return with(f, [&](auto& g) { return g.init(m, n, k, a, w, d, ws, ws_bytes); });
  }
  bool run(int f) {
    return with(f, [](auto& g) { return g.run(); });
  }
};

// Max |x - y| over bf16 outputs, to confirm each form computes the same product as cuBLASLt.
float max_abs_diff(const void* x, const void* y, size_t n) {
  std::vector<__nv_bfloat16> hx(n), hy(n);
  cudaMemcpy(hx.data(), x, n * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(hy.data(), y, n * 2, cudaMemcpyDeviceToHost);
  float m = 0.f;
  for (size_t i = 0; i < n; ++i) {
    const float d = __bfloat162float(hx[i]) - __bfloat162float(hy[i]);
    m = std::max(m, d < 0 ? -d : d);
    if (d != d) return 1e30f;
  }
  return m;
}

__global__ void fill(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16((int(h % 2001) - 1000) * 1e-3f);
  }
}

}  // namespace cutlass_probe

int main(int argc, char** argv) {
  using namespace cutlass_probe;
  // `gk_micro_cutlass_gemm M N FORM`: one shape, one CUTLASS form (0..4), 5 launches and nothing else (for ncu).
  const bool one = argc == 4;
  constexpr int kHidden = 3072, kQkv = (24 + 16) * 128;
  const int ms[] = {128, 512, 586, 1024, 2048, 3557, 4096, 4904, 8192, 8212};
  const int max_m = 8212;
  const size_t scrub_bytes = size_t(120) << 20, ws_bytes = size_t(64) << 20;
  void *scrub = nullptr, *a = nullptr, *w = nullptr, *c_ref = nullptr, *c = nullptr, *ws = nullptr;
  if (cudaMalloc(&scrub, scrub_bytes) != cudaSuccess || cudaMalloc(&a, size_t(max_m) * kHidden * 2) != cudaSuccess ||
      cudaMalloc(&w, size_t(kQkv) * kHidden * 2) != cudaSuccess ||
      cudaMalloc(&c_ref, size_t(max_m) * kQkv * 2) != cudaSuccess ||
      cudaMalloc(&c, size_t(max_m) * kQkv * 2) != cudaSuccess || cudaMalloc(&ws, ws_bytes) != cudaSuccess) {
    std::printf("cudaMalloc failed\n");
    return 1;
  }
  fill<<<1024, 256>>>(static_cast<__nv_bfloat16*>(a), size_t(max_m) * kHidden, 1u);
  fill<<<1024, 256>>>(static_cast<__nv_bfloat16*>(w), size_t(kQkv) * kHidden, 2u);
  cublasLtHandle_t lt;
  CHECK_LT(cublasLtCreate(&lt));
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  Forms forms;
  std::vector<double> sums(kForms + 1, 0.0);
  if (one) {
    const int m = std::atoi(argv[1]), n = std::atoi(argv[2]), f = std::atoi(argv[3]);
    bool ok = forms.init(f, m, n, kHidden, a, w, c, ws, 32u << 20);
    for (int i = 0; ok && i < 5; ++i) ok = forms.run(f);
    cudaDeviceSynchronize();
    std::printf("%s M %d N %d: %s\n", f >= 0 && f < kForms ? kFormNames[f] : "?", m, n, ok ? "ran" : "failed");
    return ok ? 0 : 1;
  }
  for (const int n : {kQkv, kHidden}) {
    for (const int m : ms) {
      const int k = kHidden;
      cublasLtMatmulDesc_t op;
      CHECK_LT(row_major_matmul_desc(&op));
      cublasLtMatrixLayout_t la, lb, lc;
      CHECK_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, n, k));
      CHECK_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, m, k));
      CHECK_LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, m, n));
      cublasLtMatmulPreference_t pref;
      CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
      const uint64_t wsb = 32u << 20;
      CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
      cublasLtMatmulHeuristicResult_t res;
      int count = 0;
      CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &res, &count));
      const float alpha = 1.f, beta = 0.f;
      // Form 0: cuBLASLt (its workspace in the second half of ws); forms 1..: CUTLASS.
      std::vector<std::function<bool()>> runs;
      runs.push_back([&] {
        return cublasLtMatmul(lt, op, &alpha, w, la, a, lb, &beta, c_ref, lc, c_ref, lc, &res.algo,
                              static_cast<char*>(ws) + (32u << 20), 32u << 20, nullptr) == CUBLAS_STATUS_SUCCESS;
      });
      bool ok[kForms];
      for (int f = 0; f < kForms; ++f) {
        ok[f] = forms.init(f, m, n, k, a, w, c, ws, 32u << 20);
        runs.push_back([&forms, f] { return forms.run(f); });
      }
      // Correctness of each form against cuBLASLt first (same inputs, fp32 accumulation: small differences only).
      runs[0]();
      float diff[kForms];
      for (int f = 0; f < kForms; ++f) {
        diff[f] = -1.f;
        if (!ok[f]) continue;
        cudaMemset(c, 0xff, size_t(m) * n * 2);
        ok[f] = runs[f + 1]();
        cudaDeviceSynchronize();
        if (ok[f]) diff[f] = max_abs_diff(c, c_ref, size_t(m) * n);
      }
      std::vector<std::vector<float>> us(kForms + 1);
      for (int it = 0; it < 35; ++it) {
        for (int f = 0; f <= kForms; ++f) {
          if (f > 0 && !ok[f - 1]) continue;
          cudaMemsetAsync(scrub, it & 0xff, scrub_bytes);
          cudaEventRecord(t0);
          runs[f]();
          cudaEventRecord(t1);
          cudaEventSynchronize(t1);
          float ms_ = 0.f;
          cudaEventElapsedTime(&ms_, t0, t1);
          if (it >= 5) us[f].push_back(ms_ * 1000.f);
        }
      }
      const float base = median(us[0]);
      sums[0] += base;
      std::printf("N %5d M %5d: cuBLASLt %8.1f us |", n, m, base);
      for (int f = 0; f < kForms; ++f) {
        if (!ok[f]) {
          std::printf(" %s: n/a |", kFormNames[f]);
          sums[f + 1] += base * 10;
          continue;
        }
        const float t = median(us[f + 1]);
        sums[f + 1] += t;
        std::printf(" %s %8.1f (%+.1f%%, diff %.3g) |", kFormNames[f], t, 100.0 * (t - base) / base, diff[f]);
      }
      std::printf("\n");
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(op);
    }
  }
  std::printf("sums: cuBLASLt %.1f", sums[0]);
  for (int f = 0; f < kForms; ++f) std::printf(" | %s %.1f", kFormNames[f], sums[f + 1]);
  std::printf("\n");
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) std::printf("CUDA error: %s\n", cudaGetErrorString(err));
  cublasLtDestroy(lt);
  return err == cudaSuccess ? 0 : 1;
}
