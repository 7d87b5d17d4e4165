// Gemma3 attention layer, step by step. Each "r(...)" is a rounding to bf16 that the layer's definition makes
// (a bf16 tensor result); everything else is computed in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "reference.hpp"

namespace gk_ref {

namespace {

float r(double x) { return round_bf16(static_cast<float>(x)); }

// y[m, n] = r(sum_k x[m, k] * w[n, k])
std::vector<float> linear(const float* x, const float* w, int64_t rows, int64_t in, int64_t out) {
  std::vector<float> y(static_cast<size_t>(rows * out));
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t n = 0; n < out; ++n) {
      double acc = 0.0;
      for (int64_t k = 0; k < in; ++k) acc += double(x[m * in + k]) * double(w[n * in + k]);
      y[m * out + n] = r(acc);
    }
  }
  return y;
}

// proj [B*S, heads*D] -> [B, heads, S, D], with per-head RMSNorm and RoPE when `norm_w` is given.
std::vector<float> heads_from(const std::vector<float>& proj, const Gemma3Dims& d, int64_t heads, const float* norm_w,
                              const float* cos, const float* sin) {
  const int64_t B = d.batch, S = d.seq_len, D = d.head_dim, half = D / 2;
  std::vector<float> out(static_cast<size_t>(B * heads * S * D));
  std::vector<float> y(static_cast<size_t>(D));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t s = 0; s < S; ++s) {
        const float* x = &proj[((b * S + s) * heads + h) * D];
        float* o = &out[((b * heads + h) * S + s) * D];
        if (norm_w == nullptr) {
          std::copy(x, x + D, o);
          continue;
        }
        // RMSNorm in fp32 as defined: x * rsqrt(mean(x^2) + eps) * (offset + w), then bf16.
        double ss = 0.0;
        for (int64_t i = 0; i < D; ++i) ss += double(x[i]) * double(x[i]);
        const double inv = 1.0 / std::sqrt(ss / double(D) + double(d.eps));
        for (int64_t i = 0; i < D; ++i) y[i] = r(double(x[i]) * inv * (double(d.norm_weight_offset) + norm_w[i]));
        // RoPE, rotate_half convention; each product and the sum are bf16 results.
        const float* c = cos + (b * S + s) * D;
        const float* sn = sin + (b * S + s) * D;
        for (int64_t i = 0; i < D; ++i) {
          const float rot = i < half ? -y[i + half] : y[i - half];
          o[i] = r(double(r(double(y[i]) * c[i])) + double(r(double(rot) * sn[i])));
        }
      }
    }
  }
  return out;
}

// Where the keys and values of one batch element live, and where its queries sit: `keys` keys of kv head h at
// k + h * head_stride + j * D (the same for v), query i at absolute position p0 + i (0 without a cache; the cached
// length with one). The additive mask is indexed by the call's own positions (no cache then).
struct KeySource {
  const float* k;
  const float* v;
  int64_t head_stride;
  int64_t keys;
  int64_t p0;
  int64_t first = 0;  // keys before it are hidden from every query (a left-padded sequence's pad tokens)
};

// The attention output rows of batch element b, [S, Hq * D] at `attn`, over the given keys.
void attend(const Gemma3Dims& d, const Gemma3Inputs& in, const std::vector<float>& q, int64_t b, const KeySource& ks,
            float* attn) {
  const int64_t S = d.seq_len, D = d.head_dim, Hq = d.num_q_heads, group = Hq / d.num_kv_heads;
  const float lowest_bf16 = bf16_from_bits(0xff7f);  // the most negative finite bf16
  const double scale = d.query_scale > 0.f ? d.query_scale : 1.0 / std::sqrt(double(D));
  std::vector<double> score(static_cast<size_t>(ks.keys));
  std::vector<double> p(static_cast<size_t>(ks.keys));
  // Rounds to bf16 only in the official mode.
  const auto rs = [&](double x) { return d.fp32_scores ? x : double(r(x)); };
  for (int64_t h = 0; h < Hq; ++h) {
    const float* kh = ks.k + (h / group) * ks.head_stride;
    const float* vh = ks.v + (h / group) * ks.head_stride;
    for (int64_t i = 0; i < S; ++i) {
      const int64_t pos = ks.p0 + i;
      const float* qi = &q[((b * Hq + h) * S + i) * D];
      // A query that sees no key at all (a pad token's own, before `first`) gives zeros.
      bool any = false;
      for (int64_t j = ks.first; j < ks.keys; ++j) {
        any |= d.mask != Mask::kCausal || (j <= pos && !(d.window > 0 && pos - j >= d.window));
      }
      if (!any) {
        std::fill(&attn[(i * Hq + h) * D], &attn[(i * Hq + h) * D] + D, 0.f);
        continue;
      }
      for (int64_t j = 0; j < ks.keys; ++j) {
        if (j < ks.first) {  // hidden outright: no part in the softmax
          score[j] = -std::numeric_limits<double>::infinity();
          continue;
        }
        const float* kj = kh + j * D;
        double dot = 0.0;
        for (int64_t e = 0; e < D; ++e) dot += double(qi[e]) * double(kj[e]);
        double s = rs(rs(dot) * scale);
        if (d.softcap > 0.f) {
          s = rs(s / d.softcap);
          s = rs(std::tanh(s));
          s = rs(s * d.softcap);
        }
        float m = 0.f;
        if (d.mask == Mask::kAdditive) m = in.mask[(b * S + i) * S + j];
        if (d.mask == Mask::kCausal && (j > pos || (d.window > 0 && pos - j >= d.window))) m = lowest_bf16;
        score[j] = rs(s + double(m));
      }
      // Softmax in fp32-or-better over the scores, probabilities rounded to bf16 (official mode).
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < ks.keys; ++j) mx = std::max(mx, score[j]);
      double sum = 0.0;
      for (int64_t j = 0; j < ks.keys; ++j) {
        p[j] = std::exp(score[j] - mx);
        sum += p[j];
      }
      for (int64_t j = 0; j < ks.keys; ++j) p[j] = rs(p[j] / sum);
      float* o = &attn[(i * Hq + h) * D];
      for (int64_t e = 0; e < D; ++e) {
        double acc = 0.0;
        for (int64_t j = 0; j < ks.keys; ++j) acc += p[j] * double(vh[j * D + e]);
        o[e] = r(acc);
      }
    }
  }
}

struct Projected {
  std::vector<float> q, k, v;  // [B, heads, S, D]: q and k normalized and rotated
};

Projected project(const Gemma3Dims& d, const Gemma3Inputs& in) {
  const int64_t rows = d.batch * d.seq_len, D = d.head_dim, Hq = d.num_q_heads, Hkv = d.num_kv_heads;
  Projected p;
  p.q = heads_from(linear(in.hidden_states, in.q_proj_weight, rows, d.hidden, Hq * D), d, Hq, in.q_norm_weight,
                   in.cos, in.sin);
  p.k = heads_from(linear(in.hidden_states, in.k_proj_weight, rows, d.hidden, Hkv * D), d, Hkv, in.k_norm_weight,
                   in.cos, in.sin);
  p.v = heads_from(linear(in.hidden_states, in.v_proj_weight, rows, d.hidden, Hkv * D), d, Hkv, nullptr, nullptr,
                   nullptr);
  return p;
}

}  // namespace

void gemma3_attention(const Gemma3Dims& d, const Gemma3Inputs& in, float* out) {
  gemma3_attention(d, in, out, nullptr);
}

void gemma3_attention(const Gemma3Dims& d, const Gemma3Inputs& in, float* out, Gemma3Intermediates* steps) {
  const int64_t B = d.batch, S = d.seq_len, D = d.head_dim, Hq = d.num_q_heads, Hkv = d.num_kv_heads;
  const int64_t rows = B * S;
  const Projected p = project(d, in);
  std::vector<float> attn(static_cast<size_t>(rows * Hq * D));
  for (int64_t b = 0; b < B; ++b) {
    const KeySource ks{&p.k[b * Hkv * S * D], &p.v[b * Hkv * S * D], S * D, S, 0};
    attend(d, in, p.q, b, ks, &attn[b * S * Hq * D]);
  }
  const auto y = linear(attn.data(), in.o_proj_weight, rows, Hq * D, d.hidden);
  std::copy(y.begin(), y.end(), out);
  if (steps != nullptr) {
    steps->q = p.q;
    steps->k = p.k;
    steps->v = p.v;
    steps->attn = attn;
  }
}

bool gemma3_attention_cached(const Gemma3Dims& d, const Gemma3Inputs& in, const Gemma3Cache& cache, float* out) {
  const int64_t B = d.batch, S = d.seq_len, D = d.head_dim, Hq = d.num_q_heads, Hkv = d.num_kv_heads;
  if (d.mask == Mask::kAdditive || cache.k == nullptr || cache.v == nullptr || cache.seqlens == nullptr) return false;
  for (int64_t b = 0; b < B; ++b) {
    if (cache.seqlens[b] < 0 || cache.seqlens[b] + S > cache.max_len) return false;
  }
  const Projected p = project(d, in);
  std::vector<float> attn(static_cast<size_t>(B * S * Hq * D));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = cache.seqlens[b];
    // The new tokens' k and v (as the layer stores them: bf16) into the slots after the cached ones.
    for (int64_t h = 0; h < Hkv; ++h) {
      for (int64_t s = 0; s < S; ++s) {
        const int64_t src = ((b * Hkv + h) * S + s) * D, dst = ((b * Hkv + h) * cache.max_len + len + s) * D;
        std::copy(&p.k[src], &p.k[src] + D, &cache.k[dst]);
        std::copy(&p.v[src], &p.v[src] + D, &cache.v[dst]);
      }
    }
    const int64_t base = b * Hkv * cache.max_len * D;
    const int64_t first = cache.starts != nullptr ? std::clamp<int64_t>(cache.starts[b], 0, len + S) : 0;
    const KeySource ks{&cache.k[base], &cache.v[base], cache.max_len * D, len + S, len, first};
    attend(d, in, p.q, b, ks, &attn[b * S * Hq * D]);
  }
  const auto y = linear(attn.data(), in.o_proj_weight, B * S, Hq * D, d.hidden);
  std::copy(y.begin(), y.end(), out);
  return true;
}

}  // namespace gk_ref
