// Gemma3n audio QKV projection with per-head RMSNorm, entirely in double.
#include <cmath>

#include "reference.hpp"

namespace gk_ref {

void audio_qkv(const AudioDims& d, const float* hs, const float* wq, const float* wk, const float* wv,
               const float* q_norm_w, const float* k_norm_w, double* query, double* key, double* value) {
  const int64_t rows = d.batch * d.seq_len, n = d.num_heads * d.head_dim, D = d.head_dim;
  const float* weights[3] = {wq, wk, wv};
  double* outs[3] = {query, key, value};
  for (int which = 0; which < 3; ++which) {
    for (int64_t m = 0; m < rows; ++m) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t k = 0; k < d.hidden; ++k) acc += double(hs[m * d.hidden + k]) * double(weights[which][j * d.hidden + k]);
        outs[which][m * n + j] = acc;
      }
    }
  }
  const float* norm_w[2] = {q_norm_w, k_norm_w};
  for (int which = 0; which < 2; ++which) {
    for (int64_t m = 0; m < rows; ++m) {
      for (int64_t h = 0; h < d.num_heads; ++h) {
        double* x = outs[which] + m * n + h * D;
        double ss = 0.0;
        for (int64_t i = 0; i < D; ++i) ss += x[i] * x[i];
        const double denom = std::sqrt(ss / double(D) + double(d.eps));
        for (int64_t i = 0; i < D; ++i) x[i] = x[i] / denom * double(norm_w[which][i]);
      }
    }
  }
}

}  // namespace gk_ref
