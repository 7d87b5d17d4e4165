"""Host-only tests of the Python layer (no GPU, no PyTorch needed): the ctypes structures against libgk's own
validation, error mapping, and the SOL-ExecBench package writer."""
import ctypes
import json
import re

import pytest
from conftest import ROOT

from gemma_kernels import _lib, solexecbench

FAKE = 1 << 20  # a non-null, 16-byte aligned address: the check functions never touch device memory


def gemma3_call(b=2, s=37, hidden=256, hq=4, hkv=2, d=128):
    cfg = _lib.Gemma3Config(batch=b, seq_len=s, hidden=hidden, num_q_heads=hq, num_kv_heads=hkv, head_dim=d,
                            softcap=50.0, rms_norm_eps=1e-6, norm_weight_offset=1.0, query_scale=0.0,
                            mask_mode=_lib.MASK_CAUSAL)
    bf = _lib.DTYPE_BF16
    shapes = dict(hidden_states=(b, s, hidden), cos=(b, s, d), sin=(b, s, d), attention_mask=None,
                  q_proj_weight=(hq * d, hidden), k_proj_weight=(hkv * d, hidden), v_proj_weight=(hkv * d, hidden),
                  o_proj_weight=(hidden, hq * d), q_norm_weight=(d,), k_norm_weight=(d,), out=(b, s, hidden))
    t = _lib.Gemma3Tensors()
    for i, (name, shape) in enumerate(shapes.items()):
        if shape is not None:
            setattr(t, name, _lib.make_tensor(FAKE * (i + 1), bf, shape))
    return cfg, t


def audio_call(b=2, s=5, hidden=256, h=3, d=128):
    cfg = _lib.AudioConfig(batch=b, seq_len=s, hidden=hidden, num_heads=h, head_dim=d, eps=1e-6,
                           precision=_lib.PRECISION_TF32)
    f32 = _lib.DTYPE_F32
    shapes = dict(hidden_states=(b, s, hidden), q_proj_weight=(h * d, hidden), k_proj_weight=(h * d, hidden),
                  v_proj_weight=(h * d, hidden), q_norm_weight=(d,), k_norm_weight=(d,), query_states=(b, s, h, d),
                  key_states=(b, s, h, d), value_states=(b, s, h, d))
    t = _lib.AudioTensors()
    for i, (name, shape) in enumerate(shapes.items()):
        setattr(t, name, _lib.make_tensor(FAKE * (i + 1), f32, shape))
    return cfg, t


def check_gemma3(cfg, t):
    _lib.check(_lib.library().gk_gemma3_attention_check(ctypes.byref(cfg), ctypes.byref(t)))


def check_audio(cfg, t):
    _lib.check(_lib.library().gk_audio_qkv_check(ctypes.byref(cfg), ctypes.byref(t)))


def test_valid_calls_pass_the_library_checks():
    # Every field lands where the library reads it: a valid call passes, and each broken field below is named.
    check_gemma3(*gemma3_call())
    check_audio(*audio_call())


@pytest.mark.parametrize("field", ["hidden_states", "cos", "sin", "q_proj_weight", "k_proj_weight",
                                   "v_proj_weight", "o_proj_weight", "q_norm_weight", "k_norm_weight", "out"])
def test_gemma3_names_the_broken_tensor(field):
    cfg, t = gemma3_call()
    getattr(t, field).dtype = _lib.DTYPE_F32
    with pytest.raises(_lib.GkValueError, match=field):
        check_gemma3(cfg, t)
    cfg, t = gemma3_call()
    getattr(t, field).data = None
    with pytest.raises(ValueError, match=field):
        check_gemma3(cfg, t)


@pytest.mark.parametrize("field", ["hidden_states", "q_proj_weight", "k_proj_weight", "v_proj_weight",
                                   "q_norm_weight", "k_norm_weight", "query_states", "key_states", "value_states"])
def test_audio_names_the_broken_tensor(field):
    cfg, t = audio_call()
    getattr(t, field).shape[0] += 1
    with pytest.raises(_lib.GkValueError, match=field):
        check_audio(cfg, t)


def test_config_fields_reach_the_library():
    cfg, t = gemma3_call()
    cfg.head_dim = 96  # valid but not built: a distinct status
    with pytest.raises(_lib.GkNotSupportedError):
        check_gemma3(cfg, t)
    cfg, t = gemma3_call()
    cfg.mask_mode = _lib.MASK_ADDITIVE  # now the (absent) mask tensor is required
    with pytest.raises(ValueError, match="attention_mask"):
        check_gemma3(cfg, t)
    cfg, t = audio_call()
    cfg.precision = 7
    with pytest.raises(ValueError, match="precision"):
        check_audio(cfg, t)


def test_workspace_size_query():
    size = ctypes.c_size_t()
    cfg, _ = gemma3_call()
    _lib.check(_lib.library().gk_gemma3_attention_workspace_size(ctypes.byref(cfg), ctypes.byref(size)))
    assert size.value >= 2 * 37 * (4 + 2 * 2) * 128 * 2  # at least the packed q|k|v buffer
    cfg.seq_len = 0
    with pytest.raises(ValueError, match="seq_len"):
        _lib.check(_lib.library().gk_gemma3_attention_workspace_size(ctypes.byref(cfg), ctypes.byref(size)))


@pytest.mark.parametrize("problem", sorted(solexecbench.PROBLEMS))
def test_solution_package_is_self_contained(problem, tmp_path):
    sol = solexecbench.solution(problem, ROOT)
    for key in ("name", "definition", "author", "spec", "sources"):
        assert sol[key]
    spec = sol["spec"]
    assert spec["languages"] == ["cuda_cpp"] and spec["binding"] == "torch" and spec["destination_passing_style"]
    assert any("sm_90a" in f for f in spec["compile_options"]["cuda_cflags"])
    paths = {s["path"] for s in sol["sources"]}
    assert len(paths) == len(sol["sources"])
    entry_file, entry_fn = spec["entry_point"].split("::")
    assert entry_file in paths and entry_fn == "run"
    # The driver compiles only top-level .cu/.cpp files: every translation unit must be there.
    assert not [p for p in paths if "/" in p and p.endswith((".cu", ".cpp"))]
    # Quoted includes resolve from the package root (the driver's include path) or beside the including file.
    for s in sol["sources"]:
        for inc in re.findall(r'#include "([^"]+)"', s["content"]):
            assert inc in paths, f"{s['path']} includes {inc}, which the package lacks"
    main = next(s for s in sol["sources"] if s["path"] == entry_file)["content"]
    assert "PYBIND11_MODULE" in main and "void run(" in main
    written = solexecbench.write(tmp_path, ROOT)
    assert len(written) == len(solexecbench.PROBLEMS)
    assert json.loads(written[0].read_text())["spec"]["entry_point"] == "main.cpp::run"


def test_sliding_window_reaches_the_library():
    cfg, t = gemma3_call()
    cfg.sliding_window = 16
    check_gemma3(cfg, t)
    cfg.sliding_window = -1
    with pytest.raises(ValueError, match="sliding_window must be >= 0"):
        check_gemma3(cfg, t)
    cfg.sliding_window = 16
    cfg.mask_mode = _lib.MASK_NONE
    with pytest.raises(NotImplementedError, match="causal mask mode only"):
        check_gemma3(cfg, t)


def test_one_version_everywhere():
    import gemma_kernels

    header = (ROOT / "include" / "gk" / "gk.h").read_text()
    want = re.search(r'^#define GK_VERSION_STRING "([^"]+)"', header, re.M).group(1)
    assert gemma_kernels.__version__ == want
    assert gemma_kernels.library_version() == want
    assert _lib.ABI_VERSION == int(re.search(r"^#define GK_ABI_VERSION (\d+)", header, re.M).group(1))


def test_a_library_of_another_abi_is_refused(monkeypatch):
    lib = ctypes.CDLL(str(_lib.library()._name))
    _lib._check_abi(lib, "libgk")  # the matching one passes
    monkeypatch.setattr(_lib, "ABI_VERSION", _lib.ABI_VERSION + 1)
    with pytest.raises(OSError, match="has ABI .* this package expects ABI"):
        _lib._check_abi(lib, "libgk")
    monkeypatch.undo()
    # A structure that grew on this side only (a field added to gk.h without a rebuild of the library).
    bigger = type("Bigger", (ctypes.Structure,), {"_fields_": _lib.Gemma3Config._fields_ + [("extra", ctypes.c_int64)]})
    monkeypatch.setattr(_lib, "Gemma3Config", bigger)
    with pytest.raises(OSError, match="struct sizes"):
        _lib._check_abi(lib, "libgk")


def test_ops_without_pytorch_say_to_install_it():
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys
        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("No module named 'torch'")
        sys.meta_path.insert(0, NoTorch())
        import gemma_kernels
        assert not gemma_kernels.torch_available
        try:
            gemma_kernels.gemma3_attention
        except ImportError as e:
            print("IMPORT-ERROR:", e)
        try:
            gemma_kernels.no_such_name
        except AttributeError:
            print("ATTRIBUTE-ERROR")
    """)
    import os

    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "IMPORT-ERROR: gemma_kernels.gemma3_attention needs PyTorch" in r.stdout and "pip install torch" in r.stdout
    assert "ATTRIBUTE-ERROR" in r.stdout


def test_solexecbench_without_sources_says_so_in_one_line_and_writes_nothing(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "gemma_kernels.solexecbench", "--out", str(out), "--source-root",
                        str(tmp_path / "nowhere")], capture_output=True, text=True,
                       env=dict(__import__("os").environ, PYTHONPATH=str(ROOT / "python")))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "is not a gemma-kernels source tree" in r.stderr, r.stderr
    assert not out.exists()


def cache_for(cfg, max_len=64, max_cached=60, base=40):
    bf = _lib.DTYPE_BF16
    shape = (cfg.batch, cfg.num_kv_heads, max_len, cfg.head_dim)
    return _lib.KvCache(k_cache=_lib.make_tensor(FAKE * base, bf, shape),
                        v_cache=_lib.make_tensor(FAKE * (base + 1), bf, shape),
                        cache_seqlens=_lib.make_tensor(FAKE * (base + 2), _lib.DTYPE_I32, (cfg.batch,)),
                        max_cached=max_cached)


def test_cached_and_split_calls_go_through_the_ctypes_declarations():
    lib = _lib.library()
    cfg, t = gemma3_call(s=4)
    cache = cache_for(cfg)
    _lib.check(lib.gk_gemma3_attention_check_cached(ctypes.byref(cfg), ctypes.byref(t), ctypes.byref(cache)))
    b, s, d, hq, hkv = cfg.batch, cfg.seq_len, cfg.head_dim, cfg.num_q_heads, cfg.num_kv_heads
    bf = _lib.DTYPE_BF16
    q = _lib.Gemma3QkvTensors(t.hidden_states, t.cos, t.sin, t.q_proj_weight, t.k_proj_weight, t.v_proj_weight,
                              t.q_norm_weight, t.k_norm_weight, _lib.make_tensor(FAKE * 50, bf, (b, hq, s, d)),
                              _lib.make_tensor(FAKE * 51, bf, (b, hkv, s, d)),
                              _lib.make_tensor(FAKE * 52, bf, (b, hkv, s, d)))
    _lib.check(lib.gk_gemma3_qkv_check(ctypes.byref(cfg), ctypes.byref(q), None))
    _lib.check(lib.gk_gemma3_qkv_check(ctypes.byref(cfg), ctypes.byref(q), ctypes.byref(cache)))
    a = _lib.Gemma3AttendTensors(q.q_out, t.o_proj_weight, t.out)
    _lib.check(lib.gk_gemma3_attend_check(ctypes.byref(cfg), ctypes.byref(a), ctypes.byref(cache)))
    cache.max_cached = 61  # 61 + 4 new tokens in 64 slots
    with pytest.raises(_lib.GkValueError, match="gemma3_attend: the cache holds 64 tokens"):
        _lib.check(lib.gk_gemma3_attend_check(ctypes.byref(cfg), ctypes.byref(a), ctypes.byref(cache)))
    size = ctypes.c_size_t()
    _lib.check(lib.gk_gemma3_attend_workspace_size(ctypes.byref(cfg), ctypes.byref(size)))
    assert size.value > 0


def test_prepared_weights_size_and_refusals_through_ctypes():
    """The prepared-weights entry points' declarations: the size of the three weights in fp16 with their exponents,
    and the exact mode refused with the library's message (no GPU needed)."""
    lib = _lib.library()
    cfg = _lib.AudioConfig(1, 1, 1024, 8, 128, 1e-6, _lib.PRECISION_TF32)
    size = ctypes.c_size_t()
    _lib.check(lib.gk_audio_qkv_prepared_size(ctypes.byref(cfg), ctypes.byref(size)))
    rows = 3 * 8 * 128
    assert size.value == -(-rows * 1024 * 2 // 256) * 256 + -(-rows * 4 // 256) * 256
    cfg.precision = _lib.PRECISION_EXACT
    with pytest.raises(_lib.GkNotSupportedError, match="tf32 mode"):
        _lib.check(lib.gk_audio_qkv_prepared_size(ctypes.byref(cfg), ctypes.byref(size)))
