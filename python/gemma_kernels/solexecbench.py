"""Writes SOL-ExecBench solution packages (solution.json) for L1/047 and L1/054.

    python3 -m gemma_kernels.solexecbench --out solutions/

Each package is self-contained: libgk's sources (the .cu/.cpp files flattened to the top level, which is all the
official driver compiles; headers keep their folders, which its include path resolves), the shared torch glue and
an entry file with the destination-passing `run(*inputs, *outputs)` (scalars as double) bound through pybind11.
The driver builds it with torch.utils.cpp_extension.load and the compile options below: sm_90a is named
explicitly (the driver's own "LOCAL" target would be plain sm_90, without wgmma), and cuBLASLt is linked.
The packages read libgk's sources from a gemma-kernels checkout (`--source-root`), by default the checkout this
package lives in, else the copy an installed package ships (gemma_kernels/sol_sources).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent

PROBLEMS = {
    "047": {
        "definition": "047_attention_with_qk_norm_and_rope",
        "entry": "entry_047.cpp",
        "description": "gemma-kernels Gemma3 attention layer (bf16): fused QKV+RMSNorm+RoPE for one row tile, "
                       "cuBLASLt projections otherwise, Hopper TMA/wgmma attention with softcap and GQA, "
                       "the attention_mask applied as given.",
    },
    "054": {
        "definition": "054_audio_attention_qkv_projection_with_normalization",
        "entry": "entry_054.cpp",
        "description": "gemma-kernels Gemma3n audio QKV projection (fp32 in/out, tf32 tensor cores; v's inputs "
                       "rounded to nearest, q's and k's truncated, which their RMSNorm absorbs): fused Hopper "
                       "kernels (split-K for one wave of tiles, a persistent head-tiled GEMM with stream-K "
                       "beyond), cuBLASLt + norm where the persistent kernel's grid fills poorly.",
    },
}

# Hidden visibility, as libgk is built: each package keeps its own copy of every internal symbol even when two are
# loaded into one process (only the module's init function is exported).
COMPILE_OPTIONS = {
    "cflags": ["-O3", "-std=c++17", "-fvisibility=hidden"],
    "cuda_cflags": ["-O3", "-std=c++17", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a",
                    "-Xcompiler=-fvisibility=hidden"],
    "ld_flags": ["-lcuda", "-lcublasLt"],
}


def default_source_root() -> Path:
    checkout = _HERE.parent.parent  # python/gemma_kernels -> the checkout
    if (checkout / "src" / "api" / "c_api.cpp").exists():
        return checkout
    return _HERE / "sol_sources"  # an installed package: src/ and include/gk/ as the wheel ships them


def sources(root: Path, problem: str) -> list[dict]:
    """The package's files as SOL-ExecBench source entries ({path, content})."""
    src, inc = root / "src", root / "include" / "gk"
    if not (src / "api" / "c_api.cpp").exists() or not (inc / "gk.h").exists():
        raise FileNotFoundError(f"gemma_kernels.solexecbench: {root} is not a gemma-kernels source tree")
    files: list[tuple[str, Path]] = []
    for f in sorted(src.rglob("*")):
        if not f.is_file():
            continue
        rel = f.relative_to(src).as_posix()
        if f.suffix in (".cu", ".cpp"):
            files.append(("gk_" + rel.replace("/", "_"), f))  # the driver compiles top-level files only
        elif f.suffix in (".h", ".hpp", ".cuh"):
            files.append((rel, f))
    files += [("gk/" + f.name, f) for f in sorted(inc.iterdir()) if f.suffix in (".h", ".hpp")]
    files.append(("torch_glue.hpp", _HERE / "sol_bindings" / "torch_glue.hpp"))
    files.append(("main.cpp", _HERE / "sol_bindings" / PROBLEMS[problem]["entry"]))
    return [{"path": path, "content": f.read_text()} for path, f in files]


def solution(problem: str, root: Path | None = None) -> dict:
    p = PROBLEMS[problem]
    return {
        "name": f"gemma_kernels_{problem}",
        "definition": p["definition"],
        "author": "gemma-kernels",
        "description": p["description"],
        "spec": {
            "languages": ["cuda_cpp"],
            "target_hardware": ["LOCAL"],
            "entry_point": "main.cpp::run",
            "destination_passing_style": True,
            "binding": "torch",
            "dependencies": [],
            "compile_options": COMPILE_OPTIONS,
        },
        "sources": sources(root or default_source_root(), problem),
    }


def write(out_dir: Path, root: Path | None = None) -> list[Path]:
    packages = {problem: solution(problem, root) for problem in PROBLEMS}  # every source read before any folder
    written = []
    for problem, p in PROBLEMS.items():
        d = out_dir / p["definition"]
        d.mkdir(parents=True, exist_ok=True)
        path = d / "solution.json"
        path.write_text(json.dumps(packages[problem], indent=1) + "\n")
        written.append(path)
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("solexecbench-solutions"), help="output folder")
    ap.add_argument("--source-root", type=Path, default=None, help="gemma-kernels checkout to package")
    args = ap.parse_args(argv)
    try:
        paths = write(args.out, args.source_root)
    except FileNotFoundError as e:
        print(f"{e} (pass --source-root with a gemma-kernels checkout)", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
