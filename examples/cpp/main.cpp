// Calls both gemma-kernels operators once on generated inputs and prints a summary of their outputs: the Gemma3
// attention layer (bf16, a small GQA layer with a sliding window) and the Gemma3n audio QKV projection (fp32).
// Needs an H100/H200; exits 1 with the library's message when a call fails.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gk/gk.hpp"

namespace {

#define CHECK_CUDA(x)                                                                  \
  do {                                                                                 \
    const cudaError_t e = (x);                                                         \
    if (e != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e));              \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

void check(const gk::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "gemma-kernels: %s\n", s.message().c_str());
    std::exit(1);
  }
}

// A deterministic value in [-scale, scale).
float pattern(size_t i, float scale) { return scale * (float((i * 2654435761u) % 2001u) / 1000.f - 1.f); }

uint16_t to_bf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A device tensor filled with the pattern (bf16 or fp32) and its descriptor.
struct DeviceTensor {
  void* data = nullptr;
  gk_tensor desc{};
  DeviceTensor(gk_dtype dtype, std::vector<int64_t> shape, float scale, size_t seed) {
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d);
    const size_t bytes = n * (dtype == GK_DTYPE_BF16 ? 2 : 4);
    CHECK_CUDA(cudaMalloc(&data, bytes));
    std::vector<unsigned char> host(bytes);
    for (size_t i = 0; i < n; ++i) {
      const float v = pattern(i + seed * 7919u, scale);
      if (dtype == GK_DTYPE_BF16) {
        const uint16_t h = to_bf16(v);
        std::memcpy(&host[2 * i], &h, 2);
      } else {
        std::memcpy(&host[4 * i], &v, 4);
      }
    }
    CHECK_CUDA(cudaMemcpy(data, host.data(), bytes, cudaMemcpyHostToDevice));
    desc = gk_tensor_contiguous(data, dtype, int32_t(shape.size()), shape.data());
  }
  ~DeviceTensor() { cudaFree(data); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  // Mean |x| and whether every element is finite.
  void summarize(const char* name) const {
    size_t n = 1;
    for (int i = 0; i < desc.ndim; ++i) n *= size_t(desc.shape[i]);
    const bool bf16 = desc.dtype == GK_DTYPE_BF16;
    std::vector<unsigned char> host(n * (bf16 ? 2 : 4));
    CHECK_CUDA(cudaMemcpy(host.data(), data, host.size(), cudaMemcpyDeviceToHost));
    double sum = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      float v;
      if (bf16) {
        uint16_t h;
        std::memcpy(&h, &host[2 * i], 2);
        v = from_bf16(h);
      } else {
        std::memcpy(&v, &host[4 * i], 4);
      }
      if (!std::isfinite(v)) ++bad;
      else sum += std::fabs(v);
    }
    std::printf("  %-14s %zu elements, mean |x| %.5f, %zu non-finite\n", name, n, sum / double(n), bad);
  }
};

}  // namespace

int main() {
  std::printf("gemma-kernels %s (ABI %d)\n", gk_version(), int(gk_abi_version()));
  gk::Handle handle;
  check(handle.init());
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));

  // The Gemma3 layer: B = 2, S = 300, hidden 1024, 8 query heads over 4 kv heads, a window of 128 keys, no softcap.
  gk_gemma3_attention_config g{};
  g.batch = 2, g.seq_len = 300, g.hidden = 1024, g.num_q_heads = 8, g.num_kv_heads = 4, g.head_dim = 128;
  g.softcap = 0.f, g.rms_norm_eps = 1e-6f, g.norm_weight_offset = 1.f, g.query_scale = 0.f;
  g.mask_mode = GK_MASK_CAUSAL, g.sliding_window = 128;
  const int64_t B = g.batch, S = g.seq_len, H = g.hidden, D = g.head_dim;
  DeviceTensor hs(GK_DTYPE_BF16, {B, S, H}, 1.f, 1), cos(GK_DTYPE_BF16, {B, S, D}, 1.f, 2),
      sin(GK_DTYPE_BF16, {B, S, D}, 1.f, 3), wq(GK_DTYPE_BF16, {g.num_q_heads * D, H}, 0.03f, 4),
      wk(GK_DTYPE_BF16, {g.num_kv_heads * D, H}, 0.03f, 5), wv(GK_DTYPE_BF16, {g.num_kv_heads * D, H}, 0.03f, 6),
      wo(GK_DTYPE_BF16, {H, g.num_q_heads * D}, 0.03f, 7), qn(GK_DTYPE_BF16, {D}, 0.1f, 8),
      kn(GK_DTYPE_BF16, {D}, 0.1f, 9), out(GK_DTYPE_BF16, {B, S, H}, 0.f, 10);
  gk_gemma3_attention_tensors gt{};
  gt.hidden_states = hs.desc, gt.cos = cos.desc, gt.sin = sin.desc;
  gt.q_proj_weight = wq.desc, gt.k_proj_weight = wk.desc, gt.v_proj_weight = wv.desc, gt.o_proj_weight = wo.desc;
  gt.q_norm_weight = qn.desc, gt.k_norm_weight = kn.desc, gt.out = out.desc;
  size_t g_bytes = 0;
  check(gk::gemma3_attention_workspace_size(g, &g_bytes));

  // The audio QKV projection: B = 2, S = 96, hidden 1536, 8 heads, tf32 mode.
  gk_audio_qkv_config a{};
  a.batch = 2, a.seq_len = 96, a.hidden = 1536, a.num_heads = 8, a.head_dim = 128, a.eps = 1e-6f;
  a.precision = GK_PRECISION_TF32;
  const int64_t N = a.num_heads * a.head_dim;
  DeviceTensor x(GK_DTYPE_F32, {a.batch, a.seq_len, a.hidden}, 1.f, 11), aq(GK_DTYPE_F32, {N, a.hidden}, 0.03f, 12),
      ak(GK_DTYPE_F32, {N, a.hidden}, 0.03f, 13), av(GK_DTYPE_F32, {N, a.hidden}, 0.03f, 14),
      aqn(GK_DTYPE_F32, {a.head_dim}, 1.f, 15), akn(GK_DTYPE_F32, {a.head_dim}, 1.f, 16),
      q(GK_DTYPE_F32, {a.batch, a.seq_len, a.num_heads, a.head_dim}, 0.f, 17),
      k(GK_DTYPE_F32, {a.batch, a.seq_len, a.num_heads, a.head_dim}, 0.f, 18),
      v(GK_DTYPE_F32, {a.batch, a.seq_len, a.num_heads, a.head_dim}, 0.f, 19);
  gk_audio_qkv_tensors at{};
  at.hidden_states = x.desc, at.q_proj_weight = aq.desc, at.k_proj_weight = ak.desc, at.v_proj_weight = av.desc;
  at.q_norm_weight = aqn.desc, at.k_norm_weight = akn.desc;
  at.query_states = q.desc, at.key_states = k.desc, at.value_states = v.desc;
  size_t a_bytes = 0;
  check(gk::audio_qkv_workspace_size(a, &a_bytes));

  // One workspace serves both calls (they run one after the other on one stream).
  void* workspace = nullptr;
  CHECK_CUDA(cudaMalloc(&workspace, g_bytes > a_bytes ? g_bytes : a_bytes));
  check(gk::gemma3_attention_forward(handle.get(), g, gt, workspace, g_bytes, stream));
  check(gk::audio_qkv_forward(handle.get(), a, at, workspace, a_bytes, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::printf("Gemma3 attention layer, B=%lld S=%lld, window %lld:\n", (long long)B, (long long)S,
              (long long)g.sliding_window);
  out.summarize("out");
  std::printf("audio QKV projection, B=%lld S=%lld, tf32:\n", (long long)a.batch, (long long)a.seq_len);
  q.summarize("query_states");
  k.summarize("key_states");
  v.summarize("value_states");
  CHECK_CUDA(cudaFree(workspace));
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}
