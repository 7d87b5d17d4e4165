"""The package's version: GK_VERSION_STRING of include/gk/gk.h, the project's one version number (a source
checkout reads the header; an installed package, its metadata, which the build took from that header)."""

from __future__ import annotations

import re
from pathlib import Path


def _read() -> str:
    header = Path(__file__).resolve().parent.parent.parent / "include" / "gk" / "gk.h"
    if header.exists():  # a source checkout (python/gemma_kernels -> the repository root)
        m = re.search(r'^#define GK_VERSION_STRING "([^"]+)"', header.read_text(), re.M)
        if m:
            return m.group(1)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gemma-kernels")
    except PackageNotFoundError:
        return "0+unknown"


__version__ = _read()
