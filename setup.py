"""pip install . builds libgk with the project's CMake (target `gk` only) and ships it inside the package.

GK_LIBRARY=/path/to/libgk.so.0 ships an existing build instead (e.g. a build folder made by the README's
commands, or one carried to an offline machine). The package binds the library through its C ABI with ctypes,
so the wheel works with any PyTorch version.
"""
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithLibgk(build_py):
    def run(self):
        super().run()
        lib = os.environ.get("GK_LIBRARY")
        if not lib:
            build = ROOT / "build-python"
            subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja",
                                   "-DCMAKE_BUILD_TYPE=Release", "-DGK_BUILD_TESTS=OFF", "-DGK_BUILD_TOOLS=OFF"])
            subprocess.check_call(["cmake", "--build", str(build), "--target", "gk"])
            lib = build / "lib" / "libgk.so.0"
        dest = Path(self.build_lib) / "gemma_kernels" / "lib"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(lib), dest / "libgk.so.0")


class BinaryDistribution(Distribution):
    def has_ext_modules(self):  # the wheel carries a shared library: tag it for the platform
        return True


setup(cmdclass={"build_py": BuildPyWithLibgk}, distclass=BinaryDistribution)
