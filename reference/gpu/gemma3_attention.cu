// Gemma3 attention layer on the GPU, one plain kernel per step of the definition. Rounds to bf16 exactly where
// the CPU reference does; accumulates in fp32 like the framework reference.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "reference_gpu.hpp"

namespace gk_ref_gpu {

namespace {

using bf16 = __nv_bfloat16;

__device__ float rb(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

// One thread per (b, s, head): optional RMSNorm + RoPE, and the [B,S,H*D] -> [B,H,S,D] transpose.
__global__ void heads_kernel(const bf16* proj, bf16* out, int64_t B, int64_t S, int64_t H, int64_t D,
                             const bf16* norm_w, float eps, float offset, const bf16* cos, const bf16* sin) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= B * S * H) return;
  const int64_t h = idx % H, s = (idx / H) % S, b = idx / (H * S);
  const bf16* x = proj + ((b * S + s) * H + h) * D;
  bf16* o = out + ((b * H + h) * S + s) * D;
  if (norm_w == nullptr) {
    for (int64_t i = 0; i < D; ++i) o[i] = x[i];
    return;
  }
  float ss = 0.f;
  for (int64_t i = 0; i < D; ++i) ss += float(x[i]) * float(x[i]);
  const float inv = rsqrtf(ss / float(D) + eps);
  const int64_t half = D / 2;
  const bf16* c = cos + (b * S + s) * D;
  const bf16* sn = sin + (b * S + s) * D;
  for (int64_t i = 0; i < D; ++i) {
    const float y = rb(float(x[i]) * inv * (offset + float(norm_w[i])));
    const int64_t j = i < half ? i + half : i - half;
    const float yj = rb(float(x[j]) * inv * (offset + float(norm_w[j])));
    const float rot = i < half ? -yj : yj;
    o[i] = __float2bfloat16_rn(rb(y * float(c[i])) + rb(rot * float(sn[i])));
  }
}

struct AttnArgs {
  const bf16* q;  // [B,Hq,S,D]
  // [B,Hkv,kv_len,D]: this call's keys and values (kv_len = S), or a cache's (kv_len = its capacity), of which
  // batch element b has keys[b] (S without a cache) and its queries sit at positions p0[b] + i (0 without one)
  const bf16* k;
  const bf16* v;
  int64_t kv_len;
  const int64_t* keys;
  const int64_t* p0;
  // Optional with a cache: per sequence, the first key any query sees (a left-padded sequence's pad tokens before
  // it are hidden outright; a query that then sees no key gives zeros). Null: 0.
  const int64_t* first;
  const bf16* mask;
  bf16* attn;  // [B,S,Hq*D]
  int64_t S, D, Hq, group;
  float scale, cap;
  int mask_mode;  // 0 causal, 1 additive, 2 none
  int64_t window;  // causal: > 0 hides keys `window` or more left of the query
  bool fp32_scores;  // see gk_ref::Gemma3Dims::fp32_scores
};

__device__ float block_reduce(float v, float* red, bool is_max) {
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < warps; ++w) r = is_max ? fmaxf(r, red[w]) : r + red[w];
  return r;
}

// One block per (b, h, query row i); the row of scores lives in shared memory.
__global__ void attention_row_kernel(const AttnArgs a) {
  extern __shared__ float smem[];
  const int64_t i = blockIdx.x % a.S;
  const int64_t h = (blockIdx.x / a.S) % a.Hq;
  const int64_t b = blockIdx.x / (a.S * a.Hq);
  const int64_t keys = a.keys ? a.keys[b] : a.S, pos = (a.p0 ? a.p0[b] : 0) + i;
  const int64_t first = a.first ? min(max(a.first[b], int64_t(0)), keys) : 0;
  // A query that sees no key at all (a pad token's own, before `first`: causal keys end at its position) gives zeros.
  if (a.mask_mode == 0 ? first > pos : first >= keys) {
    for (int64_t e = threadIdx.x; e < a.D; e += blockDim.x) {
      a.attn[((b * a.S + i) * a.Hq + h) * a.D + e] = __float2bfloat16_rn(0.f);
    }
    return;
  }
  float* scores = smem;       // [keys]
  float* red = smem + keys;   // [32]
  const int64_t Hkv = a.Hq / a.group, kvh = h / a.group;
  const bf16* qi = a.q + ((b * a.Hq + h) * a.S + i) * a.D;
  const bf16* kb = a.k + (b * Hkv + kvh) * a.kv_len * a.D;
  const bf16* vb = a.v + (b * Hkv + kvh) * a.kv_len * a.D;
  const float lowest_bf16 = -3.3895313892515355e38f;

  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
    if (j < first) {  // hidden outright: no part in the softmax
      scores[j] = -INFINITY;
      continue;
    }
    // 16-byte loads of the key row (D % 8 == 0 is required by the caller); products summed in dim order.
    float dot = 0.f;
    const uint4* krow = reinterpret_cast<const uint4*>(kb + j * a.D);
    for (int64_t c = 0; c < a.D / 8; ++c) {
      const uint4 raw = krow[c];
      const bf16* kv = reinterpret_cast<const bf16*>(&raw);
      for (int e = 0; e < 8; ++e) dot += float(qi[c * 8 + e]) * float(kv[e]);
    }
    const auto rs = [&](float x) { return a.fp32_scores ? x : rb(x); };
    float s = rs(rs(dot) * a.scale);
    if (a.cap > 0.f) {
      s = rs(s / a.cap);
      s = rs(tanhf(s));
      s = rs(s * a.cap);
    }
    float m = 0.f;
    if (a.mask_mode == 1) m = float(a.mask[(b * a.S + i) * a.S + j]);
    if (a.mask_mode == 0 && (j > pos || (a.window > 0 && pos - j >= a.window))) m = lowest_bf16;
    scores[j] = rs(s + m);
  }
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) mx = fmaxf(mx, scores[j]);
  mx = block_reduce(mx, red, true);
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
    scores[j] = expf(scores[j] - mx);
    sum += scores[j];
  }
  sum = block_reduce(sum, red, false);
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
    scores[j] = a.fp32_scores ? scores[j] / sum : rb(scores[j] / sum);
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < a.D; e += blockDim.x) {
    float acc = 0.f;
    for (int64_t j = 0; j < keys; ++j) acc += scores[j] * float(vb[j * a.D + e]);
    a.attn[((b * a.S + i) * a.Hq + h) * a.D + e] = __float2bfloat16_rn(acc);
  }
}

// The new tokens' k and v into the cache slots after each sequence's cached ones: one thread per element.
__global__ void cache_write_kernel(const bf16* k, const bf16* v, bf16* ck, bf16* cv, int64_t B, int64_t H, int64_t S,
                                   int64_t D, int64_t max_len, const int64_t* lens) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= B * H * S * D) return;
  const int64_t e = idx % D, s = (idx / D) % S, bh = idx / (D * S), b = bh / H;
  const int64_t dst = (bh * max_len + lens[b] + s) * D + e;
  ck[dst] = k[idx];
  cv[dst] = v[idx];
}

// The layer with or without a cache (cache.k null: without). `lens` is the host's copy of the cached lengths.
cudaError_t layer(const gk_ref::Gemma3Dims& d, const Gemma3DeviceInputs& in, const Gemma3DeviceCache& cache, bf16* out,
                  cudaStream_t stream) {
  const bool cached = cache.k != nullptr;
  if (d.head_dim % 8 != 0) return cudaErrorInvalidValue;
  const int64_t B = d.batch, S = d.seq_len, D = d.head_dim, Hq = d.num_q_heads, Hkv = d.num_kv_heads;
  int64_t max_keys = S;
  if (cached) {
    if (d.mask == gk_ref::Mask::kAdditive || cache.v == nullptr || cache.seqlens == nullptr) return cudaErrorInvalidValue;
    // 16-byte key loads (attention_row_kernel): rows of D (a multiple of 8) from 16-byte aligned bases.
    if (reinterpret_cast<uintptr_t>(cache.k) % 16 != 0 || reinterpret_cast<uintptr_t>(cache.v) % 16 != 0) {
      return cudaErrorInvalidValue;
    }
    for (int64_t b = 0; b < B; ++b) {
      if (cache.seqlens[b] < 0 || cache.seqlens[b] + S > cache.max_len) return cudaErrorInvalidValue;
      max_keys = std::max(max_keys, cache.seqlens[b] + S);
    }
  }
  if (max_keys > kMaxSeqLen) return cudaErrorInvalidValue;
  const int64_t rows = B * S;
  bf16* buf = nullptr;
  const int64_t proj_elems = rows * (Hq + 2 * Hkv) * D;
  // + lens, key counts and first keys: 3B int64
  const int64_t total = 2 * proj_elems + rows * Hq * D + (cached ? 12 * B : 0);
  cudaError_t err = cudaMallocAsync(&buf, size_t(total) * sizeof(bf16), stream);
  if (err != cudaSuccess) return err;
  bf16* pq = buf;
  bf16* pk = pq + rows * Hq * D;
  bf16* pv = pk + rows * Hkv * D;
  bf16* hq = buf + proj_elems;
  bf16* hk = hq + rows * Hq * D;
  bf16* hv = hk + rows * Hkv * D;
  bf16* attn = buf + 2 * proj_elems;
  int64_t* dev_lens = reinterpret_cast<int64_t*>(attn + rows * Hq * D);  // 8-byte aligned: D is a multiple of 8
  int64_t* dev_keys = dev_lens + B;
  int64_t* dev_first = dev_keys + B;

  auto step = [&](cudaError_t e) {
    if (err == cudaSuccess) err = e;
  };
  step(linear_bf16(in.hidden_states, in.q_proj_weight, pq, rows, d.hidden, Hq * D, stream));
  step(linear_bf16(in.hidden_states, in.k_proj_weight, pk, rows, d.hidden, Hkv * D, stream));
  step(linear_bf16(in.hidden_states, in.v_proj_weight, pv, rows, d.hidden, Hkv * D, stream));
  const auto heads = [&](const bf16* proj, bf16* dst, int64_t H, const bf16* w) {
    const int64_t n = rows * H;
    heads_kernel<<<static_cast<unsigned>((n + 127) / 128), 128, 0, stream>>>(
        proj, dst, B, S, H, D, w, d.eps, d.norm_weight_offset, in.cos, in.sin);
    step(cudaGetLastError());
  };
  heads(pq, hq, Hq, in.q_norm_weight);
  heads(pk, hk, Hkv, in.k_norm_weight);
  heads(pv, hv, Hkv, nullptr);

  AttnArgs a{};
  a.q = hq;
  a.k = hk;
  a.v = hv;
  a.kv_len = S;
  if (cached) {
    std::vector<int64_t> keys(cache.seqlens, cache.seqlens + B);
    for (auto& k : keys) k += S;
    step(cudaMemcpyAsync(dev_lens, cache.seqlens, size_t(B) * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
    step(cudaMemcpyAsync(dev_keys, keys.data(), size_t(B) * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
    if (cache.starts != nullptr) {
      step(cudaMemcpyAsync(dev_first, cache.starts, size_t(B) * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
      a.first = dev_first;
    }
    step(cudaStreamSynchronize(stream));  // `keys` is a host temporary
    const int64_t n = B * Hkv * S * D;
    cache_write_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(hk, hv, cache.k, cache.v, B, Hkv, S,
                                                                                    D, cache.max_len, dev_lens);
    step(cudaGetLastError());
    a.k = cache.k;
    a.v = cache.v;
    a.kv_len = cache.max_len;
    a.keys = dev_keys;
    a.p0 = dev_lens;
  }
  a.mask = in.mask;
  a.attn = attn;
  a.S = S;
  a.D = D;
  a.Hq = Hq;
  a.group = Hq / Hkv;
  a.scale = d.query_scale > 0.f ? d.query_scale : 1.f / sqrtf(float(D));
  a.cap = d.softcap;
  a.mask_mode = d.mask == gk_ref::Mask::kCausal ? 0 : d.mask == gk_ref::Mask::kAdditive ? 1 : 2;
  a.window = d.window;
  a.fp32_scores = d.fp32_scores;
  const size_t smem = size_t(max_keys + 32) * sizeof(float);
  step(cudaFuncSetAttribute(attention_row_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  if (err == cudaSuccess) {
    attention_row_kernel<<<static_cast<unsigned>(B * Hq * S), 128, smem, stream>>>(a);
    step(cudaGetLastError());
  }
  step(linear_bf16(attn, in.o_proj_weight, out, rows, Hq * D, d.hidden, stream));
  step(cudaFreeAsync(buf, stream));
  step(cudaStreamSynchronize(stream));
  return err;
}

}  // namespace

cudaError_t gemma3_attention(const gk_ref::Gemma3Dims& d, const Gemma3DeviceInputs& in, bf16* out,
                             cudaStream_t stream) {
  return layer(d, in, Gemma3DeviceCache{}, out, stream);
}

cudaError_t gemma3_attention_cached(const gk_ref::Gemma3Dims& d, const Gemma3DeviceInputs& in,
                                    const Gemma3DeviceCache& cache, bf16* out, cudaStream_t stream) {
  if (cache.k == nullptr) return cudaErrorInvalidValue;
  return layer(d, in, cache, out, stream);
}

}  // namespace gk_ref_gpu
