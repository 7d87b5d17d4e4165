// Whether the q heads' norm/RoPE pass could run beside the k|v projection instead of after it: the GEMM is
// compute-bound and the pass memory-bound, but a cuBLASLt GEMM's CTAs take whole SMs, so the pass would need SMs of
// its own (the GEMM told to target fewer through CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET) and enough bytes in flight on
// those few SMs. This measures the three parts under the suite's protocol (a 120 MiB memset scrub before every
// iteration; CUDA events; median of 15 after 3 warm-up):
//   - the GEMM (M x 2048 x 3072, bf16, as the layer's k|v projection) targeting all SMs or all but X;
//   - a stand-in for the pass (read and write back q's M x 3072 bf16 in place, 16-byte accesses, kLoads of them in
//     flight per thread) on X blocks of 1024 threads, one per SM;
//   - both at once on two streams, from the scrub's end to both done.
//
//   build/bin/gk_micro_pass_overlap    (one line per M and X)
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "check_lt.hpp"
#include "median.hpp"

namespace {

using gk_micro::median;

template <int kLoads>
__global__ void __launch_bounds__(1024, 1) stream_rmw_kernel(uint4* p, int64_t n) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x * kLoads;
  for (int64_t base = int64_t(blockIdx.x) * blockDim.x * kLoads + threadIdx.x; base < n; base += step) {
    uint4 v[kLoads];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int64_t at = base + int64_t(i) * blockDim.x;
      v[i] = at < n ? __ldcg(p + at) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int64_t at = base + int64_t(i) * blockDim.x;
      if (at < n) __stcg(p + at, make_uint4(v[i].y, v[i].x, v[i].w, v[i].z));  // bf16 pairs swapped: a real write
    }
  }
}

}  // namespace

int main() {
  constexpr int64_t kHidden = 3072, kKv = 2048, kQ = 3072;
  const size_t scrub_bytes = size_t(120) << 20;
  const int64_t max_m = 8192;
  void *scrub = nullptr, *a = nullptr, *w = nullptr, *c = nullptr, *q = nullptr, *ws = nullptr;
  const size_t ws_bytes = size_t(32) << 20;
  if (cudaMalloc(&scrub, scrub_bytes) != cudaSuccess || cudaMalloc(&a, max_m * kHidden * 2) != cudaSuccess ||
      cudaMalloc(&w, kKv * kHidden * 2) != cudaSuccess || cudaMalloc(&c, max_m * kKv * 2) != cudaSuccess ||
      cudaMalloc(&q, max_m * kQ * 2) != cudaSuccess || cudaMalloc(&ws, ws_bytes) != cudaSuccess) {
    std::printf("cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(a, 0x3c, max_m * kHidden * 2);
  cudaMemset(w, 0x3c, kKv * kHidden * 2);
  cudaMemset(q, 0x3c, max_m * kQ * 2);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cublasLtHandle_t lt;
  CHECK_LT(cublasLtCreate(&lt));
  cudaStream_t main_s, side_s;
  cudaStreamCreateWithFlags(&main_s, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&side_s, cudaStreamNonBlocking);
  cudaEvent_t t0, t1, fork, join;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&join, cudaEventDisableTiming);

  for (const int64_t m : {int64_t(2048), int64_t(4096), int64_t(8192)}) {
    const int64_t n16 = m * kQ * 2 / 16;
    // One GEMM setup per SM target (0: cuBLASLt's default, all SMs).
    struct Gemm {
      cublasLtMatmulDesc_t op;
      cublasLtMatrixLayout_t la, lb, lc;
      cublasLtMatmulAlgo_t algo;
    };
    const auto make = [&](int target, Gemm* g) -> int {
      CHECK_LT(row_major_matmul_desc(&g->op));
      if (target > 0) {
        const int32_t t = target;
        CHECK_LT(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &t, sizeof(t)));
      }
      CHECK_LT(cublasLtMatrixLayoutCreate(&g->la, CUDA_R_16BF, kHidden, kKv, kHidden));
      CHECK_LT(cublasLtMatrixLayoutCreate(&g->lb, CUDA_R_16BF, kHidden, m, kHidden));
      CHECK_LT(cublasLtMatrixLayoutCreate(&g->lc, CUDA_R_16BF, kKv, m, kKv));
      cublasLtMatmulPreference_t pref;
      CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
      const uint64_t wsb = ws_bytes;
      CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
      cublasLtMatmulHeuristicResult_t res{};
      int count = 0;
      CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, g->op, g->la, g->lb, g->lc, g->lc, pref, 1, &res, &count));
      cublasLtMatmulPreferenceDestroy(pref);
      if (count == 0) return 1;
      g->algo = res.algo;
      return 0;
    };
    const auto destroy = [](const Gemm& g) {
      cublasLtMatrixLayoutDestroy(g.la);
      cublasLtMatrixLayoutDestroy(g.lb);
      cublasLtMatrixLayoutDestroy(g.lc);
      cublasLtMatmulDescDestroy(g.op);
    };
    const float alpha = 1.f, beta = 0.f;
    const auto gemm = [&](const Gemm& g) {
      return cublasLtMatmul(lt, g.op, &alpha, w, g.la, a, g.lb, &beta, c, g.lc, c, g.lc, &g.algo, ws, ws_bytes,
                            main_s);
    };
    const auto pass = [&](int blocks, int loads, cudaStream_t s) {
      if (loads == 8) {
        stream_rmw_kernel<8><<<blocks, 1024, 0, s>>>(static_cast<uint4*>(q), n16);
      } else {
        stream_rmw_kernel<4><<<blocks, 1024, 0, s>>>(static_cast<uint4*>(q), n16);
      }
    };
    // Median of 15 timed iterations of `body` (enqueued on main_s between the events), each after a scrub.
    const auto timed = [&](auto&& body) {
      std::vector<float> us;
      for (int it = 0; it < 18; ++it) {
        cudaMemsetAsync(scrub, it & 0xff, scrub_bytes, main_s);
        cudaEventRecord(t0, main_s);
        body();
        cudaEventRecord(t1, main_s);
        cudaEventSynchronize(t1);
        float ms = 0.f;
        cudaEventElapsedTime(&ms, t0, t1);
        if (it >= 3) us.push_back(ms * 1000.f);
      }
      return median(us);
    };
    Gemm full{};
    if (make(0, &full) != 0) return 1;
    const float g_full = timed([&] { gemm(full); });
    const float p_full = timed([&] { pass(sms, 4, main_s); });
    std::printf("M %5lld: k|v GEMM on all SMs %7.1f us; q pass stand-in on all %d SMs %6.1f us; in turn %7.1f\n",
                static_cast<long long>(m), g_full, sms, p_full, g_full + p_full);
    for (const int x : {8, 12, 16, 24, 32}) {
      Gemm part{};
      if (make(sms - x, &part) != 0) return 1;
      const float g_part = timed([&] { gemm(part); });
      for (const int loads : {4, 8}) {
        const float p_part = timed([&] { pass(x, loads, main_s); });
        const float both = timed([&] {
          cudaEventRecord(fork, main_s);
          cudaStreamWaitEvent(side_s, fork, 0);
          pass(x, loads, side_s);
          gemm(part);
          cudaEventRecord(join, side_s);
          cudaStreamWaitEvent(main_s, join, 0);
        });
        std::printf("  X %2d, %d loads: GEMM on %3d SMs %7.1f us, pass on %2d SMs %7.1f us, together %7.1f us "
                    "(%+.1f vs in turn)\n",
                    x, loads, sms - x, g_part, x, p_part, both, both - (g_full + p_full));
      }
      destroy(part);
    }
    destroy(full);
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) std::printf("CUDA error: %s\n", cudaGetErrorString(err));
  cublasLtDestroy(lt);
  return err == cudaSuccess ? 0 : 1;
}
