"""The two operators as PyTorch custom ops (torch.library), launched through libgk's C ABI.

Each operator comes in a functional form that returns new tensors and an out= (destination-passing) form that
writes into given ones. Calls run on the current CUDA stream of the inputs' device, validate shapes and dtypes
in the library (errors carry its message: ValueError for a broken contract, NotImplementedError for what this
build does not support), and never synchronize the host. The scratch space a call needs comes from PyTorch's
caching allocator (graph-capture safe), or from a `workspace` tensor the caller passes to the out= forms.
"""

import ctypes
from typing import Optional, Tuple

import torch

from . import _lib

_DTYPES = {torch.bfloat16: _lib.DTYPE_BF16, torch.float16: _lib.DTYPE_F16, torch.float32: _lib.DTYPE_F32,
           torch.int32: _lib.DTYPE_I32}
_MASK_MODES = {"causal": _lib.MASK_CAUSAL, "additive": _lib.MASK_ADDITIVE, "none": _lib.MASK_NONE}
_PRECISIONS = {"tf32": _lib.PRECISION_TF32, "exact": _lib.PRECISION_EXACT}


def _desc(t: Optional[torch.Tensor]) -> _lib.Tensor:
    if t is None:
        return _lib.Tensor()  # null data: the library reports it if the operator needs the tensor
    return _lib.make_tensor(t.data_ptr(), _DTYPES.get(t.dtype, _lib.DTYPE_INVALID), t.shape, t.stride())


def _device_of(op: str, tensors) -> torch.device:
    devices = {t.device for t in tensors if t is not None}
    if len(devices) != 1 or next(iter(devices)).type != "cuda":
        raise ValueError(f"gemma_kernels.{op}: every tensor must be on the same CUDA device (got {sorted(map(str, devices))})")
    return next(iter(devices))


def _workspace(bytes_needed: int, device: torch.device, given: Optional[torch.Tensor], op: str):
    """(pointer, bytes, keep-alive) of the call's scratch space."""
    if given is not None:
        if given.device != device or not given.is_contiguous():
            raise ValueError(f"gemma_kernels.{op}: workspace must be a contiguous tensor on {device}")
        return given.data_ptr(), given.numel() * given.element_size(), given
    if bytes_needed == 0:
        return 0, 0, None
    # From the caching allocator, on the current stream: the block goes back to that stream's pool when `buf`
    # dies, and later work on the stream is ordered after this call's kernels (the library joins its side stream
    # back into the caller's stream before it returns).
    buf = torch.empty(bytes_needed, dtype=torch.uint8, device=device)
    return buf.data_ptr(), bytes_needed, buf


_NO_CACHE = object()  # an entry point without a cache argument (a None cache is a null pointer)


def _run(lib_prefix: str, op: str, device: torch.device, cfg, tens, workspace: Optional[torch.Tensor],
         cache=_NO_CACHE, suffix: str = "") -> None:
    """One libgk call: check, workspace size, forward. `cache` (a KvCache or None) goes after the tensors for the
    entry points that take one; `suffix` names the layer's cached entry points (_check_cached, _forward_cached)."""
    lib = _lib.library()
    extra = () if cache is _NO_CACHE else (ctypes.byref(cache) if cache is not None else None,)
    _lib.check(getattr(lib, lib_prefix + "_check" + suffix)(ctypes.byref(cfg), ctypes.byref(tens), *extra))
    size = ctypes.c_size_t()
    _lib.check(getattr(lib, lib_prefix + "_workspace_size")(ctypes.byref(cfg), ctypes.byref(size)))
    with torch.cuda.device(device):
        ws = _workspace(size.value, device, workspace, op)
        stream = torch.cuda.current_stream(device).cuda_stream
        status = getattr(lib, lib_prefix + "_forward" + suffix)(
            _lib.handle(device.index), ctypes.byref(cfg), ctypes.byref(tens), *extra, ws[0] or None, ws[1],
            stream or None
        )
    _lib.check(status)


def _kv_cache(k_cache, v_cache, cache_seqlens, max_cached: int, cache_starts=None) -> _lib.KvCache:
    cache = _lib.KvCache()
    cache.k_cache, cache.v_cache, cache.cache_seqlens = _desc(k_cache), _desc(v_cache), _desc(cache_seqlens)
    cache.max_cached = max_cached
    cache.cache_starts = _desc(cache_starts)  # None: a null descriptor, no left padding
    return cache


# ---- Gemma3 attention layer ------------------------------------------------------------------------------------


def _gemma3_config(hidden_states, q_proj_weight, k_proj_weight, q_norm_weight, attention_mask, is_causal, softcap,
                   rms_norm_eps, norm_weight_offset, query_scale, sliding_window) -> _lib.Gemma3Config:
    if hidden_states.dim() != 3 or q_norm_weight.dim() != 1:
        raise ValueError(
            "gemma_kernels.gemma3_attention: hidden_states must be [B, S, hidden] and q_norm_weight [head_dim] "
            f"(got {list(hidden_states.shape)} and {list(q_norm_weight.shape)})"
        )
    cfg = _lib.Gemma3Config()
    cfg.batch, cfg.seq_len, cfg.hidden = hidden_states.shape
    cfg.head_dim = q_norm_weight.shape[0]
    cfg.num_q_heads = q_proj_weight.shape[0] // max(cfg.head_dim, 1)
    cfg.num_kv_heads = k_proj_weight.shape[0] // max(cfg.head_dim, 1)
    cfg.softcap = softcap
    cfg.rms_norm_eps = rms_norm_eps
    cfg.norm_weight_offset = norm_weight_offset
    cfg.query_scale = query_scale
    cfg.mask_mode = _lib.MASK_ADDITIVE if attention_mask is not None else (_lib.MASK_CAUSAL if is_causal else _lib.MASK_NONE)
    cfg.sliding_window = sliding_window
    return cfg


# `workspace` is scratch whose contents mean nothing before or after a call, so it is not declared mutated: an
# optional mutated argument breaks torch's autograd-inplace handling whenever it is omitted (torch 2.11).
@torch.library.custom_op("gemma_kernels::gemma3_attention_out", mutates_args=("out",))
def gemma3_attention_out(
    hidden_states: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    attention_mask: Optional[torch.Tensor],
    q_proj_weight: torch.Tensor,
    k_proj_weight: torch.Tensor,
    v_proj_weight: torch.Tensor,
    o_proj_weight: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    out: torch.Tensor,
    softcap: float = 0.0,
    rms_norm_eps: float = 1e-6,
    is_causal: bool = True,
    norm_weight_offset: float = 1.0,
    query_scale: float = 0.0,
    workspace: Optional[torch.Tensor] = None,
    sliding_window: int = 0,
) -> None:
    """Gemma3 attention layer into `out` [B, S, hidden] (bf16). A given `attention_mask` [B, 1, S, S] is added to
    the capped scores as is; without one, `is_causal` picks causal or bidirectional attention. softcap 0 turns
    the softcap off; query_scale 0 means head_dim^-0.5; sliding_window > 0 (causal, no mask tensor) hides from
    query i every key j with i - j >= sliding_window, as Hugging Face's sliding-window layers do."""
    tensors = (hidden_states, cos, sin, attention_mask, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
               q_norm_weight, k_norm_weight, out)
    device = _device_of("gemma3_attention", tensors)
    cfg = _gemma3_config(hidden_states, q_proj_weight, k_proj_weight, q_norm_weight, attention_mask, is_causal,
                         softcap, rms_norm_eps, norm_weight_offset, query_scale, sliding_window)
    tens = _lib.Gemma3Tensors(*[_desc(t) for t in tensors])
    _run("gk_gemma3_attention", "gemma3_attention", device, cfg, tens, workspace)


@gemma3_attention_out.register_fake
def _(hidden_states, cos, sin, attention_mask, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
      q_norm_weight, k_norm_weight, out, softcap=0.0, rms_norm_eps=1e-6, is_causal=True, norm_weight_offset=1.0,
      query_scale=0.0, workspace=None, sliding_window=0):
    return None


@torch.library.custom_op("gemma_kernels::gemma3_attention", mutates_args=())
def gemma3_attention(
    hidden_states: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    attention_mask: Optional[torch.Tensor],
    q_proj_weight: torch.Tensor,
    k_proj_weight: torch.Tensor,
    v_proj_weight: torch.Tensor,
    o_proj_weight: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    softcap: float = 0.0,
    rms_norm_eps: float = 1e-6,
    is_causal: bool = True,
    norm_weight_offset: float = 1.0,
    query_scale: float = 0.0,
    sliding_window: int = 0,
) -> torch.Tensor:
    """Functional form of gemma3_attention_out: returns a new [B, S, hidden] bf16 tensor."""
    out = torch.empty(hidden_states.shape[:-1] + (o_proj_weight.shape[0],), dtype=hidden_states.dtype,
                      device=hidden_states.device)
    gemma3_attention_out(hidden_states, cos, sin, attention_mask, q_proj_weight, k_proj_weight, v_proj_weight,
                         o_proj_weight, q_norm_weight, k_norm_weight, out, softcap, rms_norm_eps, is_causal,
                         norm_weight_offset, query_scale, None, sliding_window)
    return out


@gemma3_attention.register_fake
def _(hidden_states, cos, sin, attention_mask, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
      q_norm_weight, k_norm_weight, softcap=0.0, rms_norm_eps=1e-6, is_causal=True, norm_weight_offset=1.0,
      query_scale=0.0, sliding_window=0):
    return hidden_states.new_empty(hidden_states.shape[:-1] + (o_proj_weight.shape[0],))


# ---- Gemma3 layer with a key/value cache, and its two steps ---------------------------------------------------


@torch.library.custom_op("gemma_kernels::gemma3_attention_cached_out", mutates_args=("out", "k_cache", "v_cache"))
def gemma3_attention_cached_out(
    hidden_states: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    q_proj_weight: torch.Tensor,
    k_proj_weight: torch.Tensor,
    v_proj_weight: torch.Tensor,
    o_proj_weight: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cache_seqlens: torch.Tensor,
    out: torch.Tensor,
    max_cached: int,
    softcap: float = 0.0,
    rms_norm_eps: float = 1e-6,
    is_causal: bool = True,
    norm_weight_offset: float = 1.0,
    query_scale: float = 0.0,
    workspace: Optional[torch.Tensor] = None,
    sliding_window: int = 0,
    cache_starts: Optional[torch.Tensor] = None,
) -> None:
    """The layer for S new tokens per sequence with a key/value cache in StaticCache's layout: k_cache, v_cache
    [B, Hkv, max_len, D] bf16, cache_seqlens [B] int32 on the device (tokens cached before the call; not updated),
    max_cached a host bound on them (max_cached + S <= max_len). The new tokens' k and v are written into the cache
    at cache_seqlens[b] + s, and each new query attends over cached and new keys (causal, optionally within
    sliding_window, or all of them with is_causal False); cos/sin hold the new tokens' positions. cache_starts
    (int32 [B] on the device, optional): each sequence's first real key (a left-padded batch); keys before it are
    hidden, and a query that sees no key gives zeros."""
    tensors = (hidden_states, cos, sin, None, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
               q_norm_weight, k_norm_weight, out)
    device = _device_of("gemma3_attention_cached", tensors + (k_cache, v_cache, cache_seqlens, cache_starts))
    cfg = _gemma3_config(hidden_states, q_proj_weight, k_proj_weight, q_norm_weight, None, is_causal, softcap,
                         rms_norm_eps, norm_weight_offset, query_scale, sliding_window)
    tens = _lib.Gemma3Tensors(*[_desc(t) for t in tensors])
    _run("gk_gemma3_attention", "gemma3_attention_cached", device, cfg, tens, workspace,
         _kv_cache(k_cache, v_cache, cache_seqlens, max_cached, cache_starts), "_cached")


@gemma3_attention_cached_out.register_fake
def _(hidden_states, cos, sin, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, q_norm_weight,
      k_norm_weight, k_cache, v_cache, cache_seqlens, out, max_cached, softcap=0.0, rms_norm_eps=1e-6, is_causal=True,
      norm_weight_offset=1.0, query_scale=0.0, workspace=None, sliding_window=0, cache_starts=None):
    return None


def _qkv_tensors(hidden_states, cos, sin, q_proj_weight, k_proj_weight, v_proj_weight, q_norm_weight, k_norm_weight,
                 q_out, k_out, v_out) -> _lib.Gemma3QkvTensors:
    return _lib.Gemma3QkvTensors(*[_desc(t) for t in (hidden_states, cos, sin, q_proj_weight, k_proj_weight,
                                                       v_proj_weight, q_norm_weight, k_norm_weight, q_out, k_out,
                                                       v_out)])


@torch.library.custom_op("gemma_kernels::gemma3_qkv_out", mutates_args=("q_out", "k_out", "v_out"))
def gemma3_qkv_out(
    hidden_states: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    q_proj_weight: torch.Tensor,
    k_proj_weight: torch.Tensor,
    v_proj_weight: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    q_out: torch.Tensor,
    k_out: torch.Tensor,
    v_out: torch.Tensor,
    rms_norm_eps: float = 1e-6,
    norm_weight_offset: float = 1.0,
    workspace: Optional[torch.Tensor] = None,
) -> None:
    """The layer's q|k|v step for new tokens: q_out [B, Hq, S, D], k_out and v_out [B, Hkv, S, D] (Hugging Face's
    layout of query/key/value states), q and k per-head RMS-normalized and rotated with cos/sin."""
    tensors = (hidden_states, cos, sin, q_proj_weight, k_proj_weight, v_proj_weight, q_norm_weight, k_norm_weight,
               q_out, k_out, v_out)
    device = _device_of("gemma3_qkv", tensors)
    cfg = _gemma3_config(hidden_states, q_proj_weight, k_proj_weight, q_norm_weight, None, True, 0.0, rms_norm_eps,
                         norm_weight_offset, 0.0, 0)
    _run("gk_gemma3_qkv", "gemma3_qkv", device, cfg, _qkv_tensors(*tensors), workspace, None)


@gemma3_qkv_out.register_fake
def _(hidden_states, cos, sin, q_proj_weight, k_proj_weight, v_proj_weight, q_norm_weight, k_norm_weight, q_out,
      k_out, v_out, rms_norm_eps=1e-6, norm_weight_offset=1.0, workspace=None):
    return None


def _qkv_shapes(hidden_states, q_proj_weight, k_proj_weight, q_norm_weight):
    b, s, d = hidden_states.shape[0], hidden_states.shape[1], q_norm_weight.shape[0]
    return (b, q_proj_weight.shape[0] // d, s, d), (b, k_proj_weight.shape[0] // d, s, d)


@torch.library.custom_op("gemma_kernels::gemma3_qkv", mutates_args=())
def gemma3_qkv(
    hidden_states: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    q_proj_weight: torch.Tensor,
    k_proj_weight: torch.Tensor,
    v_proj_weight: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    rms_norm_eps: float = 1e-6,
    norm_weight_offset: float = 1.0,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Functional form of gemma3_qkv_out: returns (q [B, Hq, S, D], k [B, Hkv, S, D], v [B, Hkv, S, D])."""
    q_shape, kv_shape = _qkv_shapes(hidden_states, q_proj_weight, k_proj_weight, q_norm_weight)
    q, k, v = (hidden_states.new_empty(sh) for sh in (q_shape, kv_shape, kv_shape))
    gemma3_qkv_out(hidden_states, cos, sin, q_proj_weight, k_proj_weight, v_proj_weight, q_norm_weight, k_norm_weight,
                   q, k, v, rms_norm_eps, norm_weight_offset)
    return q, k, v


@gemma3_qkv.register_fake
def _(hidden_states, cos, sin, q_proj_weight, k_proj_weight, v_proj_weight, q_norm_weight, k_norm_weight,
      rms_norm_eps=1e-6, norm_weight_offset=1.0):
    q_shape, kv_shape = _qkv_shapes(hidden_states, q_proj_weight, k_proj_weight, q_norm_weight)
    return tuple(hidden_states.new_empty(sh) for sh in (q_shape, kv_shape, kv_shape))


@torch.library.custom_op("gemma_kernels::gemma3_qkv_cached_out", mutates_args=("q_out", "k_cache", "v_cache"))
def gemma3_qkv_cached_out(
    hidden_states: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    q_proj_weight: torch.Tensor,
    k_proj_weight: torch.Tensor,
    v_proj_weight: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    q_out: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cache_seqlens: torch.Tensor,
    max_cached: int,
    rms_norm_eps: float = 1e-6,
    norm_weight_offset: float = 1.0,
    workspace: Optional[torch.Tensor] = None,
) -> None:
    """gemma3_qkv_out with k and v written into a cache (gemma3_attention_cached_out's) at cache_seqlens[b] + s."""
    tensors = (hidden_states, cos, sin, q_proj_weight, k_proj_weight, v_proj_weight, q_norm_weight, k_norm_weight,
               q_out, None, None)
    device = _device_of("gemma3_qkv", tensors + (k_cache, v_cache, cache_seqlens))
    cfg = _gemma3_config(hidden_states, q_proj_weight, k_proj_weight, q_norm_weight, None, True, 0.0, rms_norm_eps,
                         norm_weight_offset, 0.0, 0)
    _run("gk_gemma3_qkv", "gemma3_qkv", device, cfg, _qkv_tensors(*tensors), workspace,
         _kv_cache(k_cache, v_cache, cache_seqlens, max_cached))


@gemma3_qkv_cached_out.register_fake
def _(hidden_states, cos, sin, q_proj_weight, k_proj_weight, v_proj_weight, q_norm_weight, k_norm_weight, q_out,
      k_cache, v_cache, cache_seqlens, max_cached, rms_norm_eps=1e-6, norm_weight_offset=1.0, workspace=None):
    return None


def _attend_config(query, k_cache, o_proj_weight, is_causal, softcap, query_scale, sliding_window) -> _lib.Gemma3Config:
    if query.dim() != 4 or k_cache.dim() != 4 or o_proj_weight.dim() != 2:
        raise ValueError(
            "gemma_kernels.gemma3_attend: query must be [B, Hq, S, D], k_cache [B, Hkv, max_len, D] and o_proj_weight "
            f"[hidden, Hq*D] (got {list(query.shape)}, {list(k_cache.shape)} and {list(o_proj_weight.shape)})"
        )
    cfg = _lib.Gemma3Config()
    cfg.batch, cfg.num_q_heads, cfg.seq_len, cfg.head_dim = query.shape
    cfg.num_kv_heads = k_cache.shape[1]
    cfg.hidden = o_proj_weight.shape[0]
    cfg.softcap = softcap
    cfg.rms_norm_eps = 1e-6  # not read
    cfg.norm_weight_offset = 1.0
    cfg.query_scale = query_scale
    cfg.mask_mode = _lib.MASK_CAUSAL if is_causal else _lib.MASK_NONE
    cfg.sliding_window = sliding_window
    return cfg


@torch.library.custom_op("gemma_kernels::gemma3_attend_out", mutates_args=("out",))
def gemma3_attend_out(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cache_seqlens: torch.Tensor,
    o_proj_weight: torch.Tensor,
    out: torch.Tensor,
    max_cached: int,
    softcap: float = 0.0,
    is_causal: bool = True,
    query_scale: float = 0.0,
    sliding_window: int = 0,
    workspace: Optional[torch.Tensor] = None,
    cache_starts: Optional[torch.Tensor] = None,
) -> None:
    """Attention of S new queries (query [B, Hq, S, D], normalized and rotated: gemma3_qkv's q) over a cache that
    holds each sequence's cache_seqlens[b] earlier tokens followed by the S new ones (k_cache, v_cache
    [B, Hkv, max_len, D], any max_len they fit in: max_cached + S <= max_len), then the O projection into out
    [B, S, hidden]. New query i sits at position cache_seqlens[b] + i; cache_starts as for
    gemma3_attention_cached_out."""
    tensors = (query, o_proj_weight, out)
    device = _device_of("gemma3_attend", tensors + (k_cache, v_cache, cache_seqlens, cache_starts))
    cfg = _attend_config(query, k_cache, o_proj_weight, is_causal, softcap, query_scale, sliding_window)
    _run("gk_gemma3_attend", "gemma3_attend", device, cfg, _lib.Gemma3AttendTensors(*[_desc(t) for t in tensors]),
         workspace, _kv_cache(k_cache, v_cache, cache_seqlens, max_cached, cache_starts))


@gemma3_attend_out.register_fake
def _(query, k_cache, v_cache, cache_seqlens, o_proj_weight, out, max_cached, softcap=0.0, is_causal=True,
      query_scale=0.0, sliding_window=0, workspace=None, cache_starts=None):
    return None


@torch.library.custom_op("gemma_kernels::gemma3_attend", mutates_args=())
def gemma3_attend(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cache_seqlens: torch.Tensor,
    o_proj_weight: torch.Tensor,
    max_cached: int,
    softcap: float = 0.0,
    is_causal: bool = True,
    query_scale: float = 0.0,
    sliding_window: int = 0,
    cache_starts: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Functional form of gemma3_attend_out: returns a new [B, S, hidden] bf16 tensor."""
    out = query.new_empty((query.shape[0], query.shape[2], o_proj_weight.shape[0]))
    gemma3_attend_out(query, k_cache, v_cache, cache_seqlens, o_proj_weight, out, max_cached, softcap, is_causal,
                      query_scale, sliding_window, None, cache_starts)
    return out


@gemma3_attend.register_fake
def _(query, k_cache, v_cache, cache_seqlens, o_proj_weight, max_cached, softcap=0.0, is_causal=True, query_scale=0.0,
      sliding_window=0, cache_starts=None):
    return query.new_empty((query.shape[0], query.shape[2], o_proj_weight.shape[0]))


# ---- Gemma3n audio QKV projection ------------------------------------------------------------------------------


def _audio_config(hidden_states, q_proj_weight, q_norm_weight, eps, precision) -> _lib.AudioConfig:
    if hidden_states.dim() != 3 or q_norm_weight.dim() != 1:
        raise ValueError(
            "gemma_kernels.audio_qkv: hidden_states must be [B, S, hidden] and q_norm_weight [head_dim] "
            f"(got {list(hidden_states.shape)} and {list(q_norm_weight.shape)})"
        )
    if precision not in _PRECISIONS:
        raise ValueError(f"gemma_kernels.audio_qkv: precision must be 'tf32' or 'exact' (got {precision!r})")
    cfg = _lib.AudioConfig()
    cfg.batch, cfg.seq_len, cfg.hidden = hidden_states.shape
    cfg.head_dim = q_norm_weight.shape[0]
    cfg.num_heads = q_proj_weight.shape[0] // max(cfg.head_dim, 1)
    cfg.eps = eps
    cfg.precision = _PRECISIONS[precision]
    return cfg


@torch.library.custom_op("gemma_kernels::audio_qkv_out", mutates_args=("query_states", "key_states", "value_states"))
def audio_qkv_out(
    hidden_states: torch.Tensor,
    q_proj_weight: torch.Tensor,
    k_proj_weight: torch.Tensor,
    v_proj_weight: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    query_states: torch.Tensor,
    key_states: torch.Tensor,
    value_states: torch.Tensor,
    eps: float = 1e-6,
    precision: str = "tf32",
    workspace: Optional[torch.Tensor] = None,
) -> None:
    """Gemma3n audio QKV projection into query/key/value_states [B, S, H, D] (fp32); q and k per-head
    RMS-normalized (x / rms * w). precision 'tf32' (tensor cores; v's inputs rounded to nearest, q's and k's
    truncated, which their norm absorbs) or 'exact'."""
    tensors = (hidden_states, q_proj_weight, k_proj_weight, v_proj_weight, q_norm_weight, k_norm_weight,
               query_states, key_states, value_states)
    device = _device_of("audio_qkv", tensors)
    cfg = _audio_config(hidden_states, q_proj_weight, q_norm_weight, eps, precision)
    tens = _lib.AudioTensors(*[_desc(t) for t in tensors])
    _run("gk_audio_qkv", "audio_qkv", device, cfg, tens, workspace)


@audio_qkv_out.register_fake
def _(hidden_states, q_proj_weight, k_proj_weight, v_proj_weight, q_norm_weight, k_norm_weight, query_states,
      key_states, value_states, eps=1e-6, precision="tf32", workspace=None):
    return None


@torch.library.custom_op("gemma_kernels::audio_qkv", mutates_args=())
def audio_qkv(
    hidden_states: torch.Tensor,
    q_proj_weight: torch.Tensor,
    k_proj_weight: torch.Tensor,
    v_proj_weight: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    eps: float = 1e-6,
    precision: str = "tf32",
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Functional form of audio_qkv_out: returns (query_states, key_states, value_states)."""
    outs = [hidden_states.new_empty(_audio_out_shape(hidden_states, w, q_norm_weight))
            for w in (q_proj_weight, k_proj_weight, v_proj_weight)]
    audio_qkv_out(hidden_states, q_proj_weight, k_proj_weight, v_proj_weight, q_norm_weight, k_norm_weight, *outs,
                  eps, precision)
    return tuple(outs)


def _audio_out_shape(hidden_states, weight, q_norm_weight):
    d = q_norm_weight.shape[0]
    return hidden_states.shape[:-1] + (weight.shape[0] // d, d)


@audio_qkv.register_fake
def _(hidden_states, q_proj_weight, k_proj_weight, v_proj_weight, q_norm_weight, k_norm_weight, eps=1e-6,
      precision="tf32"):
    return tuple(hidden_states.new_empty(_audio_out_shape(hidden_states, w, q_norm_weight))
                 for w in (q_proj_weight, k_proj_weight, v_proj_weight))
