"""The audio operator with its weights prepared once (what a model does at load time): gk_audio_qkv_prepare turns the
three fp32 weights into the fp16 operands the tf32 mode's fp16 path reads, and each call then converts only the
activations.

    prepared = gemma_kernels.prepare_audio_weights(wq, wk, wv, head_dim=128)
    q, k, v = gemma_kernels.audio_qkv_prepared(hidden_states, prepared, q_norm, k_norm, eps=1e-6)
"""

import ctypes
from typing import NamedTuple, Optional, Tuple

import torch

from . import _lib
from .ops import _desc, _device_of, _workspace


class PreparedAudioWeights(NamedTuple):
    """A prepared-weights buffer (uint8 on the weights' device) and the shape it was prepared for: a call whose
    hidden size, heads or head_dim differ is rejected by the library."""
    buffer: torch.Tensor
    hidden: int
    num_heads: int
    head_dim: int


def _config(batch: int, seq_len: int, hidden: int, num_heads: int, head_dim: int, eps: float) -> _lib.AudioConfig:
    cfg = _lib.AudioConfig()
    cfg.batch, cfg.seq_len, cfg.hidden, cfg.num_heads, cfg.head_dim = batch, seq_len, hidden, num_heads, head_dim
    cfg.eps = eps
    cfg.precision = _lib.PRECISION_TF32
    return cfg


def prepare_audio_weights(q_proj_weight: torch.Tensor, k_proj_weight: torch.Tensor, v_proj_weight: torch.Tensor,
                          head_dim: int = 128) -> PreparedAudioWeights:
    """The three weights [H*head_dim, hidden] (fp32, on one CUDA device) prepared on the current stream; the fp32
    weights may be freed once the stream has run it."""
    device = _device_of("prepare_audio_weights", (q_proj_weight, k_proj_weight, v_proj_weight))
    if q_proj_weight.dim() != 2 or q_proj_weight.shape[0] % max(head_dim, 1) != 0:
        raise ValueError(f"gemma_kernels.prepare_audio_weights: q_proj_weight must be [H*{head_dim}, hidden] "
                         f"(got {list(q_proj_weight.shape)})")
    rows, hidden = q_proj_weight.shape
    cfg = _config(1, 1, hidden, rows // head_dim, head_dim, 1e-6)
    lib = _lib.library()
    size = ctypes.c_size_t()
    _lib.check(lib.gk_audio_qkv_prepared_size(ctypes.byref(cfg), ctypes.byref(size)))
    tens = _lib.AudioTensors()
    tens.q_proj_weight, tens.k_proj_weight, tens.v_proj_weight = (_desc(w) for w in
                                                                   (q_proj_weight, k_proj_weight, v_proj_weight))
    buffer = torch.empty(size.value, dtype=torch.uint8, device=device)
    out = _lib.AudioPrepared()
    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
        _lib.check(lib.gk_audio_qkv_prepare(_lib.handle(device.index), ctypes.byref(cfg), ctypes.byref(tens),
                                            buffer.data_ptr(), size.value, stream or None, ctypes.byref(out)))
    return PreparedAudioWeights(buffer, hidden, rows // head_dim, head_dim)


@torch.library.custom_op("gemma_kernels::audio_qkv_prepared_out",
                         mutates_args=("query_states", "key_states", "value_states"))
def audio_qkv_prepared_out(
    hidden_states: torch.Tensor,
    prepared: torch.Tensor,
    prepared_hidden: int,
    prepared_heads: int,
    prepared_head_dim: int,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    query_states: torch.Tensor,
    key_states: torch.Tensor,
    value_states: torch.Tensor,
    eps: float = 1e-6,
    workspace: Optional[torch.Tensor] = None,
) -> None:
    """audio_qkv_out in tf32 mode on prepared weights (`prepared` and the shape prepare_audio_weights recorded)."""
    tensors = (hidden_states, prepared, q_norm_weight, k_norm_weight, query_states, key_states, value_states)
    device = _device_of("audio_qkv_prepared", tensors)
    if hidden_states.dim() != 3:
        raise ValueError(f"gemma_kernels.audio_qkv_prepared: hidden_states must be [B, S, hidden] "
                         f"(got {list(hidden_states.shape)})")
    batch, seq_len, hidden = hidden_states.shape
    cfg = _config(batch, seq_len, hidden, prepared_heads, q_norm_weight.shape[0], eps)
    tens = _lib.AudioTensors()
    tens.hidden_states = _desc(hidden_states)
    tens.q_norm_weight, tens.k_norm_weight = _desc(q_norm_weight), _desc(k_norm_weight)
    tens.query_states, tens.key_states, tens.value_states = (_desc(t) for t in (query_states, key_states,
                                                                                 value_states))
    prep = _lib.AudioPrepared(prepared_hidden, prepared_heads, prepared_head_dim, prepared.data_ptr(),
                              prepared.numel() * prepared.element_size())
    lib = _lib.library()
    size = ctypes.c_size_t()
    _lib.check(lib.gk_audio_qkv_workspace_size(ctypes.byref(cfg), ctypes.byref(size)))
    with torch.cuda.device(device):
        ws = _workspace(size.value, device, workspace, "audio_qkv_prepared")
        stream = torch.cuda.current_stream(device).cuda_stream
        status = lib.gk_audio_qkv_forward_prepared(_lib.handle(device.index), ctypes.byref(cfg), ctypes.byref(tens),
                                                   ctypes.byref(prep), ws[0] or None, ws[1], stream or None)
    _lib.check(status)


@audio_qkv_prepared_out.register_fake
def _(hidden_states, prepared, prepared_hidden, prepared_heads, prepared_head_dim, q_norm_weight, k_norm_weight,
      query_states, key_states, value_states, eps=1e-6, workspace=None):
    return None


def audio_qkv_prepared(hidden_states: torch.Tensor, prepared: PreparedAudioWeights, q_norm_weight: torch.Tensor,
                       k_norm_weight: torch.Tensor, eps: float = 1e-6) -> Tuple[torch.Tensor, ...]:
    """Functional form: (query_states, key_states, value_states) [B, S, H, D] from prepared weights."""
    shape = hidden_states.shape[:-1] + (prepared.num_heads, q_norm_weight.shape[0])
    outs = [hidden_states.new_empty(shape) for _ in range(3)]
    audio_qkv_prepared_out(hidden_states, prepared.buffer, prepared.hidden, prepared.num_heads, prepared.head_dim,
                           q_norm_weight, k_norm_weight, *outs, eps)
    return tuple(outs)
