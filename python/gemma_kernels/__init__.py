"""gemma-kernels from Python: the Gemma3 attention layer and the Gemma3n audio QKV projection as PyTorch ops.

    import gemma_kernels                      # registers torch.ops.gemma_kernels.* when PyTorch is installed
    out = gemma_kernels.gemma3_attention(hs, cos, sin, None, wq, wk, wv, wo, q_norm, k_norm, softcap=50.0)

The ops call libgk through its C ABI (see _lib.py), so the package needs no rebuild per PyTorch version.
Without PyTorch the package still imports (the ctypes layer works alone); asking for an op then raises an
ImportError that says so.
"""

from ._lib import GkError, GkNotSupportedError, GkValueError, library, library_version
from ._version import __version__

__all__ = ["GkError", "GkNotSupportedError", "GkValueError", "library", "library_version", "torch_available",
           "__version__"]
_OPS = ("audio_qkv", "audio_qkv_out", "gemma3_attention", "gemma3_attention_out", "gemma3_attention_cached_out",
        "gemma3_qkv", "gemma3_qkv_out", "gemma3_qkv_cached_out", "gemma3_attend", "gemma3_attend_out",
        "prepare_audio_weights", "audio_qkv_prepared", "audio_qkv_prepared_out")

try:
    import torch  # noqa: F401
except ImportError:  # the ops need PyTorch; the ctypes layer does not
    torch_available = False

    def __getattr__(name):
        if name in _OPS:
            raise ImportError(f"gemma_kernels.{name} needs PyTorch, which is not installed: pip install torch "
                              "(any version >= 2.4 with CUDA)")
        raise AttributeError(f"module 'gemma_kernels' has no attribute {name!r}")
else:
    torch_available = True
    from .ops import (audio_qkv, audio_qkv_out, gemma3_attend, gemma3_attend_out, gemma3_attention,
                      gemma3_attention_cached_out, gemma3_attention_out, gemma3_qkv, gemma3_qkv_cached_out,
                      gemma3_qkv_out)
    from .audio_prepared import audio_qkv_prepared, audio_qkv_prepared_out, prepare_audio_weights

    __all__ += list(_OPS)
