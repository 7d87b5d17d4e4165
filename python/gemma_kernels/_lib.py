"""ctypes binding of libgk's C ABI (include/gk/gk.h).

The Python package talks to the library through its C ABI only: no compiled extension module, so one build of
libgk serves every PyTorch version (and the low-level part works without PyTorch at all). The structures below
mirror gk.h field for field; tests/python/test_host.py checks them against the library's own validation.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

GK_MAX_DIMS = 4
# GK_ABI_VERSION of the gk.h these structures mirror: a library of another ABI, or whose structs differ in size from
# these, is refused (library()).
ABI_VERSION = 3

# gk_status
SUCCESS = 0
INVALID_ARGUMENT = 1
NOT_SUPPORTED = 2
WORKSPACE_TOO_SMALL = 3
CUDA_ERROR = 4
CUBLAS_ERROR = 5
INTERNAL_ERROR = 6

# gk_dtype
DTYPE_INVALID = 0
DTYPE_BF16 = 1
DTYPE_F16 = 2
DTYPE_F32 = 3
DTYPE_I32 = 4

# gk_mask_mode
MASK_CAUSAL = 0
MASK_ADDITIVE = 1
MASK_NONE = 2

# gk_precision
PRECISION_TF32 = 0
PRECISION_EXACT = 1


class Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * GK_MAX_DIMS),
        ("strides", ctypes.c_int64 * GK_MAX_DIMS),
    ]


class Gemma3Config(ctypes.Structure):
    _fields_ = [
        ("batch", ctypes.c_int64),
        ("seq_len", ctypes.c_int64),
        ("hidden", ctypes.c_int64),
        ("num_q_heads", ctypes.c_int64),
        ("num_kv_heads", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("softcap", ctypes.c_float),
        ("rms_norm_eps", ctypes.c_float),
        ("norm_weight_offset", ctypes.c_float),
        ("query_scale", ctypes.c_float),
        ("mask_mode", ctypes.c_int),
        ("sliding_window", ctypes.c_int64),
    ]


class Gemma3Tensors(ctypes.Structure):
    _fields_ = [
        (name, Tensor)
        for name in (
            "hidden_states",
            "cos",
            "sin",
            "attention_mask",
            "q_proj_weight",
            "k_proj_weight",
            "v_proj_weight",
            "o_proj_weight",
            "q_norm_weight",
            "k_norm_weight",
            "out",
        )
    ]


class AudioConfig(ctypes.Structure):
    _fields_ = [
        ("batch", ctypes.c_int64),
        ("seq_len", ctypes.c_int64),
        ("hidden", ctypes.c_int64),
        ("num_heads", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("eps", ctypes.c_float),
        ("precision", ctypes.c_int),
    ]


class AudioTensors(ctypes.Structure):
    _fields_ = [
        (name, Tensor)
        for name in (
            "hidden_states",
            "q_proj_weight",
            "k_proj_weight",
            "v_proj_weight",
            "q_norm_weight",
            "k_norm_weight",
            "query_states",
            "key_states",
            "value_states",
        )
    ]


class KvCache(ctypes.Structure):
    _fields_ = [
        ("k_cache", Tensor),
        ("v_cache", Tensor),
        ("cache_seqlens", Tensor),
        ("max_cached", ctypes.c_int64),
        ("cache_starts", Tensor),
    ]


class Gemma3QkvTensors(ctypes.Structure):
    _fields_ = [
        (name, Tensor)
        for name in (
            "hidden_states",
            "cos",
            "sin",
            "q_proj_weight",
            "k_proj_weight",
            "v_proj_weight",
            "q_norm_weight",
            "k_norm_weight",
            "q_out",
            "k_out",
            "v_out",
        )
    ]


class Gemma3AttendTensors(ctypes.Structure):
    _fields_ = [(name, Tensor) for name in ("query", "o_proj_weight", "out")]


class AudioPrepared(ctypes.Structure):
    _fields_ = [("hidden", ctypes.c_int64), ("num_heads", ctypes.c_int64), ("head_dim", ctypes.c_int64),
                ("data", ctypes.c_void_p), ("bytes", ctypes.c_size_t)]


class GkError(RuntimeError):
    """A failing libgk call; `status` is the gk_status code, the message is the library's."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class GkValueError(GkError, ValueError):
    """GK_STATUS_INVALID_ARGUMENT: a tensor, size or scalar breaks the operator's contract."""


class GkNotSupportedError(GkError, NotImplementedError):
    """GK_STATUS_NOT_SUPPORTED: valid, but not implemented by this build (e.g. head_dim 96)."""


def _candidates() -> list[Path]:
    here = Path(__file__).resolve().parent
    paths = []
    env = os.environ.get("GK_LIBRARY")
    if env:
        paths.append(Path(env))
    paths.append(here / "lib" / "libgk.so.0")  # an installed package
    repo = here.parent.parent  # a source checkout: python/gemma_kernels -> repo root
    paths.append(repo / "build" / "lib" / "libgk.so.0")  # the README's build
    return paths


# libgk's CUDA libraries and where they come from: the nvidia-cuda-runtime and nvidia-cublas wheels (the package's
# dependencies) when they are installed, else the system's loader (a CUDA 13 toolkit in ld.so.conf or
# LD_LIBRARY_PATH). Loading them first, by path, makes the wheels' copies the ones libgk binds to.
_CUDA_LIBS = ("libcudart.so.13", "libcublasLt.so.13")
_CUDA_HINT = ("libgk needs the CUDA 13 runtime and cuBLASLt: pip install nvidia-cuda-runtime nvidia-cublas (the "
              "package's dependencies), or install the CUDA 13 toolkit where the loader finds it (ldconfig or "
              "LD_LIBRARY_PATH)")


def _preload_cuda_wheels() -> None:
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for name in _CUDA_LIBS:
            lib = Path(root) / "cu13" / "lib" / name
            if lib.exists():
                ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)


_lib = None
_lib_lock = threading.Lock()


def library() -> ctypes.CDLL:
    """The loaded libgk (GK_LIBRARY overrides where it is looked for)."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        tried = []
        for p in _candidates():
            tried.append(str(p))
            if p.exists():
                _preload_cuda_wheels()
                try:
                    lib = ctypes.CDLL(str(p))
                except OSError as e:
                    if any(name in str(e) for name in _CUDA_LIBS):
                        raise OSError(f"gemma_kernels: loading {p}: {e}. {_CUDA_HINT}") from e
                    raise
                _check_abi(lib, p)
                _declare(lib)
                _lib = lib
                return lib
        raise OSError(
            "gemma_kernels: libgk.so.0 not found (tried: " + ", ".join(tried) + "); build it with CMake or set GK_LIBRARY"
        )


def _check_abi(lib: ctypes.CDLL, path: Path) -> None:
    """Refuses a libgk whose structs this binding would misread (another ABI version, or other struct sizes)."""
    fix = "install the gemma-kernels package and libgk of one version (or point GK_LIBRARY at a matching build)"
    if not hasattr(lib, "gk_abi_version"):
        raise OSError(f"gemma_kernels: {path} predates ABI checks (ABI 1); this package expects ABI {ABI_VERSION}: {fix}")
    lib.gk_abi_version.restype = ctypes.c_int32
    lib.gk_abi_version.argtypes = []
    lib.gk_abi_struct_size.restype = ctypes.c_size_t
    lib.gk_abi_struct_size.argtypes = [ctypes.c_int32]
    lib.gk_version.restype = ctypes.c_char_p
    lib.gk_version.argtypes = []
    abi = lib.gk_abi_version()
    mine = [Tensor, Gemma3Config, Gemma3Tensors, AudioConfig, AudioTensors, KvCache, Gemma3QkvTensors,
            Gemma3AttendTensors, AudioPrepared]  # gk_abi_struct order
    theirs = [lib.gk_abi_struct_size(i) for i in range(len(mine))]
    if abi != ABI_VERSION or theirs != [ctypes.sizeof(s) for s in mine]:
        raise OSError(
            f"gemma_kernels: {path} (libgk {lib.gk_version().decode()}) has ABI {abi}, struct sizes {theirs}; this "
            f"package expects ABI {ABI_VERSION}, sizes {[ctypes.sizeof(s) for s in mine]}: {fix}")


def library_version() -> str:
    """The loaded libgk's version (GK_VERSION_STRING as it was built)."""
    return library().gk_version().decode()


def _declare(lib: ctypes.CDLL) -> None:
    st = ctypes.c_int
    p = ctypes.POINTER
    lib.gk_last_error_message.restype = ctypes.c_char_p
    lib.gk_last_error_message.argtypes = []
    lib.gk_status_string.restype = ctypes.c_char_p
    lib.gk_status_string.argtypes = [st]
    lib.gk_handle_create.restype = st
    lib.gk_handle_create.argtypes = [p(ctypes.c_void_p)]
    lib.gk_handle_destroy.restype = st
    lib.gk_handle_destroy.argtypes = [ctypes.c_void_p]
    lib.gk_handle_set_overrides.restype = st
    lib.gk_handle_set_overrides.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    _declare_prepared(lib, st, p)
    for prefix, cfg, tens in (("gk_gemma3_attention", Gemma3Config, Gemma3Tensors), ("gk_audio_qkv", AudioConfig, AudioTensors)):
        check = getattr(lib, prefix + "_check")
        check.restype = st
        check.argtypes = [p(cfg), p(tens)]
        ws = getattr(lib, prefix + "_workspace_size")
        ws.restype = st
        ws.argtypes = [p(cfg), p(ctypes.c_size_t)]
        fwd = getattr(lib, prefix + "_forward")
        fwd.restype = st
        fwd.argtypes = [ctypes.c_void_p, p(cfg), p(tens), ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        plan = getattr(lib, prefix + "_plan")
        plan.restype = st
        plan.argtypes = [ctypes.c_void_p, p(cfg), p(tens), ctypes.c_char_p, ctypes.c_size_t]
    # The calls with a key/value cache: (config, tensors, cache) where the others take (config, tensors).
    for prefix, tens in (("gk_gemma3_attention", Gemma3Tensors), ("gk_gemma3_qkv", Gemma3QkvTensors),
                         ("gk_gemma3_attend", Gemma3AttendTensors)):
        cached = "_cached" if prefix == "gk_gemma3_attention" else ""
        check = getattr(lib, prefix + "_check" + cached)
        check.restype = st
        check.argtypes = [p(Gemma3Config), p(tens), p(KvCache)]
        fwd = getattr(lib, prefix + "_forward" + cached)
        fwd.restype = st
        fwd.argtypes = [ctypes.c_void_p, p(Gemma3Config), p(tens), p(KvCache), ctypes.c_void_p, ctypes.c_size_t,
                        ctypes.c_void_p]
        if not cached:
            ws = getattr(lib, prefix + "_workspace_size")
            ws.restype = st
            ws.argtypes = [p(Gemma3Config), p(ctypes.c_size_t)]


def _declare_prepared(lib, st, p) -> None:
    """The audio operator's prepared weights (gk_audio_qkv_prepare)."""
    lib.gk_audio_qkv_prepared_size.restype = st
    lib.gk_audio_qkv_prepared_size.argtypes = [p(AudioConfig), p(ctypes.c_size_t)]
    lib.gk_audio_qkv_prepare.restype = st
    lib.gk_audio_qkv_prepare.argtypes = [ctypes.c_void_p, p(AudioConfig), p(AudioTensors), ctypes.c_void_p,
                                         ctypes.c_size_t, ctypes.c_void_p, p(AudioPrepared)]
    lib.gk_audio_qkv_forward_prepared.restype = st
    lib.gk_audio_qkv_forward_prepared.argtypes = [ctypes.c_void_p, p(AudioConfig), p(AudioTensors), p(AudioPrepared),
                                                  ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def check(status: int) -> None:
    """Raises the exception that matches a failing gk_status, with the library's message."""
    if status == SUCCESS:
        return
    lib = library()
    msg = (lib.gk_last_error_message() or b"").decode(errors="replace") or lib.gk_status_string(status).decode()
    if status == INVALID_ARGUMENT:
        raise GkValueError(status, msg)
    if status == NOT_SUPPORTED:
        raise GkNotSupportedError(status, msg)
    raise GkError(status, msg)


def make_tensor(data_ptr: int, dtype: int, shape, strides=None) -> Tensor:
    """A gk_tensor descriptor; strides in elements (contiguous row-major when omitted)."""
    t = Tensor()
    t.data = data_ptr or None
    t.dtype = dtype
    t.ndim = len(shape)
    if t.ndim > GK_MAX_DIMS:
        raise ValueError(f"gemma_kernels: tensors have at most {GK_MAX_DIMS} dimensions (got {t.ndim})")
    if strides is None:
        strides, acc = [], 1
        for n in reversed(shape):
            strides.insert(0, acc)
            acc *= n
    for i, (n, s) in enumerate(zip(shape, strides)):
        t.shape[i] = int(n)
        t.strides[i] = int(s)
    return t


class _Handles(threading.local):
    def __init__(self):
        self.by_device: dict[int, ctypes.c_void_p] = {}


_handles = _Handles()


def handle(device_index: int) -> ctypes.c_void_p:
    """This thread's libgk handle for a device (created on first use; the caller makes the device current).
    Handles live as long as the process (a handle is one thread's: gk.h); make the first call of a thread
    outside CUDA-graph capture, as with any library that sets up state on first use."""
    h = _handles.by_device.get(device_index)
    if h is None:
        h = ctypes.c_void_p()
        check(library().gk_handle_create(ctypes.byref(h)))
        _handles.by_device[device_index] = h
    return h


def set_overrides(spec, device_index: int) -> None:
    """Pins planner choices for this thread's handle on a device ("key=value,..."; None or "" clears them; unknown
    keys raise GkValueError). docs/dispatch.md lists the keys."""
    check(library().gk_handle_set_overrides(handle(device_index), None if spec is None else spec.encode()))
