// cuBLASLt helpers of the microbenchmarks: the check of a call (print the failing call and leave main() with 1),
// and the row-major mapping src/common/gemm.cpp uses.
#pragma once

#include <cublasLt.h>

#include <cstdio>

#define CHECK_LT(x)                                                                 \
  do {                                                                              \
    const cublasStatus_t s_ = (x);                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                              \
      std::printf("%s failed: %d (line %d)\n", #x, static_cast<int>(s_), __LINE__); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

// D[M, N] = A[M, K] * W[N, K]^T, row-major, as cuBLASLt's column-major D^T = W^T^T A^T: W transposed, A not.
inline cublasStatus_t row_major_matmul_desc(cublasLtMatmulDesc_t* op) {
  cublasStatus_t s = cublasLtMatmulDescCreate(op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(*op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(*op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  return s;
}
