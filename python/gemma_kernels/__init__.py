"""gemma-kernels from Python: the Gemma3 attention layer and the Gemma3n audio QKV projection as PyTorch ops.

    import gemma_kernels                      # registers torch.ops.gemma_kernels.* when PyTorch is installed
    out = gemma_kernels.gemma3_attention(hs, cos, sin, None, wq, wk, wv, wo, q_norm, k_norm, softcap=50.0)

The ops call libgk through its C ABI (see _lib.py), so the package needs no rebuild per PyTorch version.
Without PyTorch the package still imports (the ctypes layer works alone); the ops are then absent.
"""

from ._lib import GkError, GkNotSupportedError, GkValueError, library

__all__ = ["GkError", "GkNotSupportedError", "GkValueError", "library", "torch_available"]

try:
    import torch  # noqa: F401
except ImportError:  # the ops need PyTorch; the ctypes layer does not
    torch_available = False
else:
    torch_available = True
    from .ops import audio_qkv, audio_qkv_out, gemma3_attention, gemma3_attention_out

    __all__ += ["audio_qkv", "audio_qkv_out", "gemma3_attention", "gemma3_attention_out"]
