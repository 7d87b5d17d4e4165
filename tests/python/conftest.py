"""Python tests of the gemma_kernels package. `host` tests need only libgk (CI runs them); `gpu` tests need
PyTorch and a CUDA device of compute capability 9.0 and skip with the reason otherwise. The package is imported
from the source tree (python/) and libgk from GK_LIBRARY or the checkout's build/ folder."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for p in (ROOT / "python", ROOT / "scripts"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


def gpu_skip_reason():
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device"
    if torch.cuda.get_device_capability() != (9, 0):
        return f"libgk is built for sm_90a; this device is sm_{''.join(map(str, torch.cuda.get_device_capability()))}"
    return None


def pytest_collection_modifyitems(config, items):
    reason = gpu_skip_reason()
    if reason is None:
        return
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))
