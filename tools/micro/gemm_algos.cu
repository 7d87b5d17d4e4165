// Whether cuBLASLt's first heuristic answer is also its fastest for the 047 layer's GEMMs: for each projection shape
// the layer runs (q: N = Hq*D, k|v: a strided batch of two N = Hkv*D, O: N = hidden), up to 16 heuristic answers
// are timed under the suite's protocol (a 120 MiB memset scrub before every iteration; CUDA events around the
// GEMM alone; median of 30 after 5 warm-up), in the row-major mapping src/common/gemm.cpp uses.
//
//   build/bin/gk_micro_gemm_algos    (one line per shape: answer 0's time, the fastest answer and its time)
//   build/bin/gk_micro_gemm_algos --l2-weights M   (the shapes at M rows only, every answer's time, with the weights
//                                                   read into L2 after each scrub, as the layer's O projection finds
//                                                   them at one row tile behind the split kernel's prefetch)
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "check_lt.hpp"
#include "median.hpp"

namespace {

using gk_micro::median;

struct Shape {
  const char* name;
  int64_t m, n, k, ldc, batch, batch_stride_c;
};

// Reads [p, p + bytes) so that it lands in L2 (the sum keeps the loads alive).
__global__ void touch_kernel(const int4* p, int64_t n, int* sink) {
  int acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int4 v = __ldcg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7fffffff) *sink = acc;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t only_m = 0;  // --l2-weights M
  if (argc == 3 && std::string(argv[1]) == "--l2-weights") only_m = std::stoll(argv[2]);
  constexpr int64_t kHidden = 3072, kQ = 24 * 128, kKv = 8 * 128;
  const int64_t ms[] = {128, 512, 586, 1024, 2048, 3557, 4096, 4904, 8192, 8212};
  std::vector<Shape> shapes;
  for (int64_t m : ms) {
    if (only_m > 0 && m != only_m) continue;
    shapes.push_back({"q", m, kQ, kHidden, kQ + 2 * kKv, 1, 0});
    shapes.push_back({"k|v", m, kKv, kHidden, kQ + 2 * kKv, 2, kKv});
    shapes.push_back({"o", m, kHidden, kQ, kHidden, 1, 0});
  }
  const size_t scrub_bytes = size_t(120) << 20;
  const int64_t max_m = 8212;
  int* sink = nullptr;
  void *scrub = nullptr, *a = nullptr, *w = nullptr, *c = nullptr, *ws = nullptr;
  const size_t ws_bytes = size_t(32) << 20;
  if (cudaMalloc(&scrub, scrub_bytes) != cudaSuccess || cudaMalloc(&a, max_m * kQ * 2) != cudaSuccess ||
      cudaMalloc(&w, kQ * kHidden * 2) != cudaSuccess || cudaMalloc(&c, max_m * (kQ + 2 * kKv) * 2) != cudaSuccess ||
      cudaMalloc(&ws, ws_bytes) != cudaSuccess || cudaMalloc(&sink, sizeof(int)) != cudaSuccess) {
    std::printf("cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(a, 0x3c, max_m * kQ * 2);  // bf16 0x3c3c ~ 0.0115: finite products, no denormals
  cudaMemset(w, 0x3c, kQ * kHidden * 2);
  cublasLtHandle_t lt;
  CHECK_LT(cublasLtCreate(&lt));
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  double sum_first = 0, sum_best = 0;
  for (const Shape& s : shapes) {
    cublasLtMatmulDesc_t op;
    CHECK_LT(row_major_matmul_desc(&op));
    cublasLtMatrixLayout_t la, lb, lc;
    CHECK_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.k, s.n, s.k));
    CHECK_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.k, s.m, s.k));
    CHECK_LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, s.n, s.m, s.ldc));
    if (s.batch > 1) {
      const int32_t count = static_cast<int32_t>(s.batch);
      const int64_t stride_w = s.n * s.k, zero = 0;
      for (auto [l, st] : {std::pair{la, stride_w}, std::pair{lb, zero}, std::pair{lc, s.batch_stride_c}}) {
        CHECK_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
        CHECK_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof(st)));
      }
    }
    cublasLtMatmulPreference_t pref;
    CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t wsb = ws_bytes;
    CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
    cublasLtMatmulHeuristicResult_t res[16];
    int count = 0;
    CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 16, res, &count));
    const float alpha = 1.f, beta = 0.f;
    std::vector<float> med(count, 0.f);
    for (int i = 0; i < count; ++i) {
      std::vector<float> us;
      for (int it = 0; it < 35; ++it) {
        cudaMemsetAsync(scrub, it & 0xff, scrub_bytes);
        if (only_m > 0) touch_kernel<<<264, 512>>>(static_cast<const int4*>(w), s.n * s.k * s.batch * 2 / 16, sink);
        cudaEventRecord(t0);
        const cublasStatus_t st =
            cublasLtMatmul(lt, op, &alpha, w, la, a, lb, &beta, c, lc, c, lc, &res[i].algo, ws, ws_bytes, nullptr);
        cudaEventRecord(t1);
        cudaEventSynchronize(t1);
        if (st != CUBLAS_STATUS_SUCCESS) break;
        float ms_ = 0.f;
        cudaEventElapsedTime(&ms_, t0, t1);
        if (it >= 5) us.push_back(ms_ * 1000.f);
      }
      med[i] = us.empty() ? 1e9f : median(us);
    }
    if (only_m > 0) {
      for (int i = 0; i < count; ++i) {
        std::printf("  %-4s M %5lld answer %2d: %8.1f us\n", s.name, static_cast<long long>(s.m), i, med[i]);
      }
    }
    const int best = static_cast<int>(std::min_element(med.begin(), med.end()) - med.begin());
    std::printf("%-4s M %5lld N %5lld K %5lld: answers %2d, first %8.1f us, fastest #%2d %8.1f us (%+.1f%%)\n", s.name,
                static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k), count,
                med[0], best, med[best], 100.0 * (med[best] - med[0]) / med[0]);
    sum_first += med[0];
    sum_best += med[best];
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
  }
  std::printf("sum over shapes: first answers %.1f us, fastest %.1f us\n", sum_first, sum_best);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) std::printf("CUDA error: %s\n", cudaGetErrorString(err));
  cublasLtDestroy(lt);
  return err == cudaSuccess ? 0 : 1;
}
