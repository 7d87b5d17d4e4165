// Row-major "NT" GEMMs through cuBLASLt: C[M,N] = A[M,K] * B[N,K]^T, the shape of every projection here
// (activations times a [out_features, in_features] weight). Plans (descriptors, layouts and the heuristic's
// algorithm) are built once per shape and cached in the handle, so a timed call does no selection work.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <tuple>

#include "common/lru_cache.hpp"
#include "gk/gk.hpp"

namespace gk::detail {

enum class GemmKind : int {
  kBf16,        // bf16 in, bf16 out, fp32 accumulate
  kF32,         // fp32 in/out, fp32 FMA (exact)
  kF32FastTf32  // fp32 in/out on tf32 tensor cores (cuBLASLt rounds the inputs to nearest tf32)
};

struct GemmShape {
  int64_t m, n, k;
  int64_t lda, ldb, ldc;  // row strides in elements
  GemmKind kind;
  uint32_t alignment = 16;  // filled in by GemmRunner::run from the pointers
  // A strided batch of GEMMs sharing A: batch i reads B + i * batch_stride_b and writes C + i * batch_stride_c
  // (elements, >= 0). The strides are part of the plan, so a caller whose strides change from call to call makes
  // a plan (a heuristic query) for each.
  int64_t batch = 1;
  int64_t batch_stride_b = 0, batch_stride_c = 0;

  auto key() const {
    return std::make_tuple(m, n, k, lda, ldb, ldc, static_cast<int>(kind), alignment, batch, batch_stride_b,
                           batch_stride_c);
  }
  bool operator<(const GemmShape& o) const { return key() < o.key(); }
};

// cuBLASLt workspace every GEMM may use; the operators reserve it in their workspace.
inline constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

// Plans a handle keeps (least recently used forgotten first; a forgotten shape costs one heuristic query when it
// comes back). A layer call uses two to four (q, k|v or k and v, O), the batched k|v one per k -> v weight
// distance: 4096 hold one layer's plans for 1000 or more token counts, or a 62-layer model's for 64 (a plan is a
// few hundred bytes of descriptors).
inline constexpr size_t kMaxGemmPlans = 4096;

class GemmRunner {
 public:
  GemmRunner() = default;
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  Status init();
  // `what` names the GEMM in error messages, e.g. "gemma3_attention: q projection".
  Status run(const char* what, const GemmShape& shape, const void* a, const void* b, void* c, void* workspace,
             size_t workspace_bytes, cudaStream_t stream);

 private:
  struct Plan;
  // Shared: a plan stays alive for the call that uses it even if another thread's call forgets it meanwhile.
  Status get_plan(const char* what, const GemmShape& shape, std::shared_ptr<const Plan>* plan);

  cublasLtHandle_t lt_ = nullptr;
  std::mutex mu_;
  LruCache<GemmShape, std::shared_ptr<const Plan>> plans_{kMaxGemmPlans};
};

}  // namespace gk::detail
