#include "common/gemm.hpp"

#include <climits>

#include "common/status_util.hpp"

namespace gk::detail {

namespace {

const char* lt_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    default:
      return "cuBLAS error";
  }
}

#define GK_LT_TRY(expr, what)                                                                              \
  do {                                                                                                    \
    cublasStatus_t st_ = (expr);                                                                          \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                     \
      return error(GK_STATUS_CUBLAS_ERROR, "%s: %s failed: %s (%d)", what, #expr, lt_status_name(st_),    \
                   static_cast<int>(st_));                                                                \
  } while (0)

// Largest power of two (16..256) dividing every pointer (a batch's too): cuBLASLt only offers kernels that this
// alignment allows.
uint32_t common_alignment(const GemmShape& s, const void* a, const void* b, const void* c) {
  auto bits = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) | reinterpret_cast<uintptr_t>(c);
  if (s.batch > 1) {
    const uint64_t elem = s.kind == GemmKind::kBf16 ? 2 : 4;
    bits |= uintptr_t(s.batch_stride_b * elem) | uintptr_t(s.batch_stride_c * elem);
  }
  uint32_t align = 256;
  while (align > 16 && (bits % align) != 0) align /= 2;
  return align;
}

}  // namespace

struct GemmRunner::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // cuBLAS "A": the [N,K] operand, read transposed
  cublasLtMatrixLayout_t b = nullptr;  // cuBLAS "B": the [M,K] operand
  cublasLtMatrixLayout_t c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  // The heuristic found no algorithm: remembered, so that a caller with a fallback (the batched k|v GEMM, the one
  // q|k|v GEMM) does not pay the query again on every call.
  bool declined = false;

  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

GemmRunner::~GemmRunner() {
  plans_.clear();
  if (lt_) cublasLtDestroy(lt_);
}

Status GemmRunner::init() {
  GK_LT_TRY(cublasLtCreate(&lt_), "gk_handle_create");
  return Status::Ok();
}

Status GemmRunner::get_plan(const char* what, const GemmShape& shape, std::shared_ptr<const Plan>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto no_algorithm = [&] {
    return error(GK_STATUS_CUBLAS_ERROR, "%s: cuBLASLt has no algorithm for M=%lld N=%lld K=%lld (batch %lld)", what,
                 static_cast<long long>(shape.m), static_cast<long long>(shape.n), static_cast<long long>(shape.k),
                 static_cast<long long>(shape.batch));
  };
  if (const auto* cached = plans_.find(shape)) {
    if ((*cached)->declined) return no_algorithm();
    *out = *cached;
    return Status::Ok();
  }
  if (shape.batch < 1 || shape.batch > INT32_MAX || shape.batch_stride_b < 0 || shape.batch_stride_c < 0) {
    return error(GK_STATUS_INVALID_ARGUMENT, "%s: batch %lld with strides %lld, %lld is not supported", what,
                 static_cast<long long>(shape.batch), static_cast<long long>(shape.batch_stride_b),
                 static_cast<long long>(shape.batch_stride_c));
  }
  auto plan = std::make_shared<Plan>();
  const cudaDataType io = shape.kind == GemmKind::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      shape.kind == GemmKind::kF32FastTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  GK_LT_TRY(cublasLtMatmulDescCreate(&plan->op, compute, CUDA_R_32F), what);
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  GK_LT_TRY(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)), what);
  GK_LT_TRY(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)), what);
  // Column-major view of row-major data: C^T[N,M] = B[N,K] (stored K x N) ^T * A^T (stored K x M).
  GK_LT_TRY(cublasLtMatrixLayoutCreate(&plan->a, io, shape.k, shape.n, shape.ldb), what);
  GK_LT_TRY(cublasLtMatrixLayoutCreate(&plan->b, io, shape.k, shape.m, shape.lda), what);
  GK_LT_TRY(cublasLtMatrixLayoutCreate(&plan->c, io, shape.n, shape.m, shape.ldc), what);
  if (shape.batch > 1) {
    const int32_t count = static_cast<int32_t>(shape.batch);
    const int64_t zero = 0;
    const std::tuple<cublasLtMatrixLayout_t, int64_t> batched[] = {
        {plan->a, shape.batch_stride_b}, {plan->b, zero}, {plan->c, shape.batch_stride_c}};
    for (const auto& [layout, stride] : batched) {
      GK_LT_TRY(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
                what);
      GK_LT_TRY(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                 sizeof(stride)),
                what);
    }
  }

  cublasLtMatmulPreference_t pref = nullptr;
  GK_LT_TRY(cublasLtMatmulPreferenceCreate(&pref), what);
  const uint64_t ws = kGemmWorkspaceBytes;
  const uint32_t align = shape.alignment;
  cublasStatus_t st =
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(lt_, plan->op, plan->a, plan->b, plan->c, plan->c, pref, 1, &result,
                                        &count);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  GK_LT_TRY(st, what);
  if (count == 0) {
    plan->declined = true;
    plans_.insert(shape, std::move(plan));
    return no_algorithm();
  }
  plan->algo = result.algo;
  *out = plans_.insert(shape, std::move(plan));
  return Status::Ok();
}

Status GemmRunner::run(const char* what, const GemmShape& shape_in, const void* a, const void* b, void* c,
                       void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  GemmShape shape = shape_in;
  shape.alignment = common_alignment(shape, a, b, c);
  std::shared_ptr<const Plan> plan;
  GK_RETURN_IF_ERROR(get_plan(what, shape, &plan));
  const float alpha = 1.0f, beta = 0.0f;
  GK_LT_TRY(cublasLtMatmul(lt_, plan->op, &alpha, b, plan->a, a, plan->b, &beta, c, plan->c, c, plan->c,
                           &plan->algo, workspace, workspace_bytes, stream),
            what);
  return Status::Ok();
}

}  // namespace gk::detail
