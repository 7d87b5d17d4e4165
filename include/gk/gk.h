/*
 * gemma-kernels public C ABI.
 *
 * Host-only header: no device code, no CUDA headers needed. Every entry point takes device pointers described
 * by gk_tensor, returns a gk_status, and on failure leaves a readable message for the calling thread in
 * gk_last_error_message(). Nothing here allocates device memory inside an operator call or synchronizes the
 * host with the device: callers pass a workspace (size from the *_workspace_size query) and a CUDA stream.
 */
#ifndef GK_GK_H_
#define GK_GK_H_

#include <stddef.h>
#include <stdint.h>

#if defined(GK_BUILDING_LIBRARY)
#define GK_API __attribute__((visibility("default")))
#else
#define GK_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The project's one version number: CMake, the Python package and `gk --version` read it from here. */
#define GK_VERSION_MAJOR 0
#define GK_VERSION_MINOR 3
#define GK_VERSION_PATCH 0
#define GK_VERSION_STRING "0.3.0"
/* Raised whenever a public struct or enum changes layout or meaning. A binding that copies the structs (the Python
 * package does, with ctypes) compares it and the struct sizes with the library's and refuses a mismatch. */
#define GK_ABI_VERSION 3

/* The loaded library's GK_VERSION_STRING and GK_ABI_VERSION. */
GK_API const char* gk_version(void);
GK_API int32_t gk_abi_version(void);
typedef enum gk_abi_struct {
  GK_ABI_TENSOR = 0,
  GK_ABI_GEMMA3_CONFIG = 1,
  GK_ABI_GEMMA3_TENSORS = 2,
  GK_ABI_AUDIO_CONFIG = 3,
  GK_ABI_AUDIO_TENSORS = 4,
  GK_ABI_KV_CACHE = 5,
  GK_ABI_GEMMA3_QKV_TENSORS = 6,
  GK_ABI_GEMMA3_ATTEND_TENSORS = 7,
  GK_ABI_AUDIO_PREPARED = 8
} gk_abi_struct;
/* sizeof the struct as the library was built; 0 for a value outside gk_abi_struct. */
GK_API size_t gk_abi_struct_size(int32_t which);

/* Same layout as cudaStream_t / CUstream, so a cudaStream_t converts implicitly; NULL is the legacy default. */
struct CUstream_st;
typedef struct CUstream_st* gk_stream_t;

typedef enum gk_status {
  GK_STATUS_SUCCESS = 0,
  GK_STATUS_INVALID_ARGUMENT = 1,      /* a tensor, size or scalar breaks the operator's contract */
  GK_STATUS_NOT_SUPPORTED = 2,         /* a valid configuration this build does not implement (e.g. head_dim 96) */
  GK_STATUS_WORKSPACE_TOO_SMALL = 3,   /* workspace smaller than the *_workspace_size query returned */
  GK_STATUS_CUDA_ERROR = 4,            /* the CUDA runtime reported an error (message names the step) */
  GK_STATUS_CUBLAS_ERROR = 5,          /* cuBLASLt reported an error (message names the GEMM) */
  GK_STATUS_INTERNAL_ERROR = 6
} gk_status;

typedef enum gk_dtype {
  GK_DTYPE_INVALID = 0,
  GK_DTYPE_BF16 = 1,
  GK_DTYPE_F16 = 2,
  GK_DTYPE_F32 = 3,
  GK_DTYPE_I32 = 4
} gk_dtype;

#define GK_MAX_DIMS 4

/* A dense device tensor. Strides are in elements. Operators require row-major contiguous tensors (the stride
 * of a dimension of size 1 is not checked) and 16-byte aligned data unless the operator says otherwise. */
typedef struct gk_tensor {
  void* data;
  gk_dtype dtype;
  int32_t ndim;
  int64_t shape[GK_MAX_DIMS];
  int64_t strides[GK_MAX_DIMS];
} gk_tensor;

/* Fills a contiguous row-major descriptor (ndim <= GK_MAX_DIMS; extra dims are ignored). */
GK_API gk_tensor gk_tensor_contiguous(void* data, gk_dtype dtype, int32_t ndim, const int64_t* shape);

typedef struct gk_handle_st* gk_handle_t;

/* A handle owns the cuBLASLt state and cached GEMM plans; one per thread (or guard it), bound to the device
 * current at creation and to that device's primary context (the runtime API's; kernel attributes are set in it
 * once, at creation). It also keeps up to 32 instantiated CUDA graphs, one per chain of kernels a call makes
 * (the "launch" key of gk_handle_set_overrides): outside stream capture a call of several of the library's own
 * kernels goes out as one launch of such a graph from the second call of that chain on, so two calls of one chain
 * made with one handle on two streams run one after the other. */
GK_API gk_status gk_handle_create(gk_handle_t* handle);
GK_API gk_status gk_handle_destroy(gk_handle_t handle);

/* Pins planner choices for the calls made with this handle, in the syntax "key=value,key=value" (e.g.
 * "attention.kernel=sm80,qkv=cublas"; "auto" or an absent key keeps the planner's choice; NULL or "" clears every
 * pin). Unknown keys or values fail with a message listing what is allowed, and leave the handle's pins unchanged.
 * A new handle has none; the library reads no environment (the gk CLI and the tests pass GK_OVERRIDES, same
 * syntax, through this call). A pinned choice applies where its kernel can take the call's shape; elsewhere the planner's choice stands.
 * docs/dispatch.md lists the keys. For tests and measurements: results stay within the operator's tolerance
 * whatever is pinned. */
GK_API gk_status gk_handle_set_overrides(gk_handle_t handle, const char* spec);

/* Message of the last failing call on this thread ("" when none). Valid until the next gk call on the thread. */
GK_API const char* gk_last_error_message(void);
GK_API const char* gk_status_string(gk_status status);

/* ---------------------------------------------------------------------------------------------------------
 * Operator 1: Gemma3 attention layer (bf16).
 * out = O-proj(attention(RoPE(RMSNorm(hs Wq^T)), RoPE(RMSNorm(hs Wk^T)), hs Wv^T)), GQA, optional softcap.
 * ------------------------------------------------------------------------------------------------------- */
typedef enum gk_mask_mode {
  GK_MASK_CAUSAL = 0,   /* key j visible to query i iff j <= i; attention_mask is not read */
  GK_MASK_ADDITIVE = 1, /* attention_mask bf16 [B,1,S,S] is added to the capped scores as given; values at or
                           below about -2.36e38 (and -inf, NaN) count as masked out, and a row masked everywhere
                           averages V over all keys. The call classifies the mask into 64 x 64 tiles first
                           (the workspace grows by about B*S*S/8 bytes); S up to 4194240. */
  GK_MASK_NONE = 2      /* every key visible (bidirectional); attention_mask is not read */
} gk_mask_mode;

typedef struct gk_gemma3_attention_config {
  int64_t batch;          /* B >= 1 */
  int64_t seq_len;        /* S >= 1 */
  int64_t hidden;         /* multiple of 64 */
  int64_t num_q_heads;    /* multiple of num_kv_heads; group size 1..8 */
  int64_t num_kv_heads;
  int64_t head_dim;       /* 128 or 256 */
  float softcap;          /* logit softcap; 0 disables it */
  float rms_norm_eps;
  float norm_weight_offset; /* RMSNorm scale is (offset + w): 1 for Gemma3, 0 for Gemma3n */
  float query_scale;        /* score scale; 0 selects head_dim^-0.5 */
  gk_mask_mode mask_mode;
  int64_t sliding_window;   /* 0: off. Causal mode only: key j visible to query i iff j <= i and i - j < window
                               (Hugging Face's sliding-window layers); tiles outside the band are never visited */
} gk_gemma3_attention_config;

/* Shapes: hidden_states [B,S,hidden]; cos, sin [B,S,D]; attention_mask [B,1,S,S] (additive mode only, 2-byte
 * alignment suffices); q_proj_weight [Hq*D,hidden]; k_proj_weight, v_proj_weight [Hkv*D,hidden];
 * o_proj_weight [hidden,Hq*D]; q_norm_weight, k_norm_weight [D]; out [B,S,hidden]. All bf16. */
typedef struct gk_gemma3_attention_tensors {
  gk_tensor hidden_states;
  gk_tensor cos;
  gk_tensor sin;
  gk_tensor attention_mask;
  gk_tensor q_proj_weight;
  gk_tensor k_proj_weight;
  gk_tensor v_proj_weight;
  gk_tensor o_proj_weight;
  gk_tensor q_norm_weight;
  gk_tensor k_norm_weight;
  gk_tensor out;
} gk_gemma3_attention_tensors;

/* Validates a call without touching the device. */
GK_API gk_status gk_gemma3_attention_check(const gk_gemma3_attention_config* config,
                                           const gk_gemma3_attention_tensors* tensors);
GK_API gk_status gk_gemma3_attention_workspace_size(const gk_gemma3_attention_config* config, size_t* bytes);
/* workspace: device memory, 256-byte aligned, at least the queried size; it may be reused after the stream
 * has finished the call. */
GK_API gk_status gk_gemma3_attention_forward(gk_handle_t handle, const gk_gemma3_attention_config* config,
                                             const gk_gemma3_attention_tensors* tensors, void* workspace,
                                             size_t workspace_bytes, gk_stream_t stream);

/* A key/value cache in Hugging Face's StaticCache layout, for a call that adds seq_len new tokens per sequence
 * after the ones already cached. Its tensors are device memory of the handle's device (not checked: that needs the
 * device), apart from the workspace and every other tensor of the call. */
typedef struct gk_kv_cache {
  gk_tensor k_cache;       /* bf16 [B, Hkv, max_len, D], contiguous, 16-byte aligned */
  gk_tensor v_cache;       /* the same shape */
  gk_tensor cache_seqlens; /* int32 [B] in device memory: tokens cached per sequence before the call (not updated) */
  int64_t max_cached;      /* the caller's bound on every cache_seqlens[b] (the lengths stay on the device); the call
                              checks max_cached + seq_len <= max_len, and never writes past max_len whatever the
                              device lengths hold */
  gk_tensor cache_starts;  /* optional (null data: none): int32 [B] in device memory, the first key each sequence's
                              queries see; keys before it (a left-padded batch's pad tokens) are hidden from every
                              query. A query that sees no key at all (a pad token's own query) gives zeros. */
} gk_kv_cache;

/* The layer for new tokens with a cache: hidden_states, cos and sin [B, S, ...] describe the S new tokens of each
 * sequence (cos/sin at their positions cache_seqlens[b] .. cache_seqlens[b] + S - 1); their k (normalized and
 * rotated) and v are written into the caches at those positions, and each new query attends over the cached and
 * new keys: causally (within the sliding window, if set) in causal mode, or all of them in mask mode none. The
 * additive mode takes no cache (GK_STATUS_NOT_SUPPORTED). The workspace is gk_gemma3_attention_workspace_size's. */
GK_API gk_status gk_gemma3_attention_check_cached(const gk_gemma3_attention_config* config,
                                                  const gk_gemma3_attention_tensors* tensors,
                                                  const gk_kv_cache* cache);
GK_API gk_status gk_gemma3_attention_forward_cached(gk_handle_t handle, const gk_gemma3_attention_config* config,
                                                    const gk_gemma3_attention_tensors* tensors,
                                                    const gk_kv_cache* cache, void* workspace,
                                                    size_t workspace_bytes, gk_stream_t stream);

/* The layer in two steps, for callers that keep the cache themselves (Hugging Face's DynamicCache, a paged cache):
 * gk_gemma3_qkv computes the new tokens' q and k (normalized and rotated) and v; the caller stores k and v, or lets
 * the call write them into a cache; gk_gemma3_attend attends the new queries over a cache that holds them and applies
 * the O projection. On one cache, qkv (writing the cache) then attend computes what forward_cached computes.
 * Both take the layer's config: qkv reads its shapes, rms_norm_eps and norm_weight_offset; attend its shapes, softcap,
 * query_scale, mask_mode (causal or none) and sliding_window. Each has its own workspace size. */

/* hidden_states [B,S,hidden]; cos, sin [B,S,D]; weights as for the layer; q_out [B,Hq,S,D]; k_out, v_out
 * [B,Hkv,S,D] (the layout of Hugging Face's query/key/value states). All bf16, contiguous. */
typedef struct gk_gemma3_qkv_tensors {
  gk_tensor hidden_states;
  gk_tensor cos;
  gk_tensor sin;
  gk_tensor q_proj_weight;
  gk_tensor k_proj_weight;
  gk_tensor v_proj_weight;
  gk_tensor q_norm_weight;
  gk_tensor k_norm_weight;
  gk_tensor q_out;
  gk_tensor k_out; /* with a cache: not written, and may be a null descriptor */
  gk_tensor v_out;
} gk_gemma3_qkv_tensors;

/* cache: null, or a cache that receives k and v at positions cache_seqlens[b] + s (as forward_cached writes them). */
GK_API gk_status gk_gemma3_qkv_check(const gk_gemma3_attention_config* config, const gk_gemma3_qkv_tensors* tensors,
                                     const gk_kv_cache* cache);
GK_API gk_status gk_gemma3_qkv_workspace_size(const gk_gemma3_attention_config* config, size_t* bytes);
GK_API gk_status gk_gemma3_qkv_forward(gk_handle_t handle, const gk_gemma3_attention_config* config,
                                       const gk_gemma3_qkv_tensors* tensors, const gk_kv_cache* cache,
                                       void* workspace, size_t workspace_bytes, gk_stream_t stream);

/* query [B,Hq,S,D] (gk_gemma3_qkv's q_out); o_proj_weight [hidden,Hq*D]; out [B,S,hidden]. All bf16, contiguous. */
typedef struct gk_gemma3_attend_tensors {
  gk_tensor query;
  gk_tensor o_proj_weight;
  gk_tensor out;
} gk_gemma3_attend_tensors;

/* The cache holds, per sequence, cache_seqlens[b] earlier tokens followed by the S new ones (their k and v already
 * stored); new query i sits at position cache_seqlens[b] + i. max_len may be any length the tokens fit in (a
 * DynamicCache's keys as its update returns them). */
GK_API gk_status gk_gemma3_attend_check(const gk_gemma3_attention_config* config,
                                        const gk_gemma3_attend_tensors* tensors, const gk_kv_cache* cache);
GK_API gk_status gk_gemma3_attend_workspace_size(const gk_gemma3_attention_config* config, size_t* bytes);
GK_API gk_status gk_gemma3_attend_forward(gk_handle_t handle, const gk_gemma3_attention_config* config,
                                          const gk_gemma3_attend_tensors* tensors, const gk_kv_cache* cache,
                                          void* workspace, size_t workspace_bytes, gk_stream_t stream);

/* Writes into buf (capacity len bytes, NUL-terminated) the plan the next forward call with these arguments would
 * run, as the complete list of its choices in gk_handle_set_overrides' syntax: passing that string back pins exactly
 * this plan. GK_STATUS_INVALID_ARGUMENT when buf is too small (the message gives the length needed). */

GK_API gk_status gk_gemma3_attention_plan(gk_handle_t handle, const gk_gemma3_attention_config* config,
                                          const gk_gemma3_attention_tensors* tensors, char* buf, size_t len);
/* The same for gk_gemma3_attention_forward_cached with this cache, its attention planned from the cache's bound on
 * cached tokens (max_cached). A decode step's kernel has no key of its own: its plan names no attention kernel. */
GK_API gk_status gk_gemma3_attention_plan_cached(gk_handle_t handle, const gk_gemma3_attention_config* config,
                                                 const gk_gemma3_attention_tensors* tensors, const gk_kv_cache* cache,
                                                 char* buf, size_t len);

/* ---------------------------------------------------------------------------------------------------------
 * Operator 2: Gemma3n audio QKV projection with per-head RMSNorm (fp32).
 * q = RMSNorm(hs Wq^T) * wq, k = RMSNorm(hs Wk^T) * wk, v = hs Wv^T; outputs [B,S,H,D].
 * ------------------------------------------------------------------------------------------------------- */
typedef enum gk_precision {
  /* Tensor cores on tf32 inputs; passes the official tolerance. v's inputs are rounded to nearest; q's and k's may
   * be read truncated (the tensor cores drop the low 13 mantissa bits), an error of rounding's spread plus a bias in
   * proportion to the value, which their RMSNorm divides out wherever mean(x^2) of a head is well above eps (where
   * it is not, the outputs are small and part of the bias stays). A signalling NaN whose payload lies only in those
   * 13 bits then reads as Inf there: in a q or k weight row it leaves that column NaN and, for tokens whose
   * activation meets it nonzero, the rest of its head zero. Where the plan takes fp16 operands (audio.tf32=f16, by
   * default from 6144 rows, and prepared weights), every input is rounded to nearest as tf32 and scaled per row by a
   * power of two into fp16's range: the same products, except for elements more than 2^28 below their row's
   * largest, and such a NaN stays a NaN. */
  GK_PRECISION_TF32 = 0,
  /* Error at or below fp32 SGEMM's: 3xTF32, or (audio.exact=f16, by default past 128 rows) each input as two fp16
   * terms with three products, each K-block's sums added in fp32. */
  GK_PRECISION_EXACT = 1
} gk_precision;

typedef struct gk_audio_qkv_config {
  int64_t batch;     /* B >= 1 */
  int64_t seq_len;   /* S >= 1 */
  int64_t hidden;    /* multiple of 64 */
  int64_t num_heads; /* H >= 1 */
  int64_t head_dim;  /* 128 */
  float eps;
  gk_precision precision;
} gk_audio_qkv_config;

/* Shapes: hidden_states [B,S,hidden]; q/k/v_proj_weight [H*D,hidden]; q_norm_weight, k_norm_weight [D];
 * query_states, key_states, value_states [B,S,H,D]. All fp32. */
typedef struct gk_audio_qkv_tensors {
  gk_tensor hidden_states;
  gk_tensor q_proj_weight;
  gk_tensor k_proj_weight;
  gk_tensor v_proj_weight;
  gk_tensor q_norm_weight;
  gk_tensor k_norm_weight;
  gk_tensor query_states;
  gk_tensor key_states;
  gk_tensor value_states;
} gk_audio_qkv_tensors;

GK_API gk_status gk_audio_qkv_check(const gk_audio_qkv_config* config, const gk_audio_qkv_tensors* tensors);
/* The workspace holds, in tf32 mode, a tf32-rounded copy of v's weights (4*H*D*hidden bytes) or, where that is
 * larger and B*S <= 3*H*D, of the activations (4*B*S*hidden bytes); in exact mode
 * the activations split into two tf32 parts (8*B*S*hidden bytes) while that stays within 256 MiB. In both, while the
 * fp16 activations stay within 256 MiB, the fp16 path's operands with their row exponents: T terms (1 in tf32 mode,
 * 2 in exact mode) of the activations and the three weights, (2*T*hidden + 4)*(B*S + 3*H*D) bytes. */
GK_API gk_status gk_audio_qkv_workspace_size(const gk_audio_qkv_config* config, size_t* bytes);
GK_API gk_status gk_audio_qkv_forward(gk_handle_t handle, const gk_audio_qkv_config* config,
                                      const gk_audio_qkv_tensors* tensors, void* workspace, size_t workspace_bytes,
                                      gk_stream_t stream);

/* Weights prepared once for the tf32 mode (what a model does at load time): the three weights as the fp16 path reads
 * them (each weight row scaled into fp16's range with tf32's rounding, and its exponent), in device memory the caller
 * owns, gk_audio_qkv_prepared_size bytes (256-byte aligned), written by gk_audio_qkv_prepare on `stream` and read by
 * gk_audio_qkv_forward_prepared in place of the fp32 weights. The struct records what the buffer holds; a forward
 * call whose hidden size, heads or head_dim differ is rejected. The exact mode takes no prepared weights. */
typedef struct gk_audio_qkv_prepared {
  int64_t hidden;
  int64_t num_heads;
  int64_t head_dim;
  void* data;
  size_t bytes;
} gk_audio_qkv_prepared;

GK_API gk_status gk_audio_qkv_prepared_size(const gk_audio_qkv_config* config, size_t* bytes);
/* Reads only the tensors' q_proj_weight, k_proj_weight and v_proj_weight; fills *prepared once the launch is made. */
GK_API gk_status gk_audio_qkv_prepare(gk_handle_t handle, const gk_audio_qkv_config* config,
                                      const gk_audio_qkv_tensors* tensors, void* data, size_t bytes,
                                      gk_stream_t stream, gk_audio_qkv_prepared* prepared);
/* The forward pass with prepared weights: the tensors' three weights are not read (their data may be null); the
 * workspace is at most gk_audio_qkv_workspace_size's. */
GK_API gk_status gk_audio_qkv_forward_prepared(gk_handle_t handle, const gk_audio_qkv_config* config,
                                               const gk_audio_qkv_tensors* tensors,
                                               const gk_audio_qkv_prepared* prepared, void* workspace,
                                               size_t workspace_bytes, gk_stream_t stream);

/* The plan a forward call with these arguments would run (see gk_gemma3_attention_plan). */
GK_API gk_status gk_audio_qkv_plan(gk_handle_t handle, const gk_audio_qkv_config* config,
                                   const gk_audio_qkv_tensors* tensors, char* buf, size_t len);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GK_GK_H_ */
