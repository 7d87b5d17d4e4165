#!/usr/bin/env bash
# What a user installing gemma-kernels meets, checked without a GPU (a host test, tests/CMakeLists.txt):
#   1. pip wheel . builds one py3-none wheel with libgk inside, and leaves the source tree as it was;
#   2. the wheel installs into a fresh virtual environment and imports, its version the library's and gk.h's;
#   3. cmake --install of a build gives a CMake package that examples/cpp builds against (find_package(gk));
# and first, that CMake finds nvcc in the toolkit's place when it is not on PATH.
#
#   scripts/check-packaging.sh BUILD_DIR      (BUILD_DIR: a configured and built tree, for step 3)
set -euo pipefail
# What it needs from the python3 on PATH; without it the test reports as skipped (exit 77, tests/CMakeLists.txt).
for need in "import scikit_build_core" "import venv, ensurepip" "import pip"; do
  python3 -c "$need" > /dev/null 2>&1 || { echo "check-packaging: skipped: python3 lacks '$need'"; exit 77; }
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$1" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
VERSION=$(sed -n 's/^#define GK_VERSION_STRING "\(.*\)"/\1/p' "$ROOT/include/gk/gk.h")
fail() { echo "check-packaging: $*" >&2; exit 1; }

echo "== 0. configure with nvcc off PATH"
env PATH=/usr/bin:/bin cmake -S "$ROOT" -B "$TMP/no-path" -G Ninja -DGK_BUILD_TESTS=OFF -DGK_BUILD_TOOLS=OFF > /dev/null ||
  fail "CMake cannot find nvcc when it is not on PATH"

echo "== 1. pip wheel (version $VERSION)"
before=""
if git -C "$ROOT" rev-parse --git-dir > /dev/null 2>&1; then before=$(git -C "$ROOT" status --porcelain --ignored); fi
# No build isolation: scikit-build-core comes from scripts/install-deps.sh, so this needs no network.
python3 -m pip wheel "$ROOT" --no-deps --no-build-isolation -q -w "$TMP/wheel"
wheel=$(ls "$TMP"/wheel/*.whl)
[ "$(basename "$wheel")" = "gemma_kernels-$VERSION-py3-none-linux_x86_64.whl" ] || fail "unexpected wheel $(basename "$wheel")"
listing=$(python3 -m zipfile -l "$wheel")
for f in gemma_kernels/lib/libgk.so.0 gemma_kernels/__init__.py gemma_kernels/sol_sources/src/api/c_api.cpp \
         gemma_kernels/sol_sources/include/gk/gk.h "gemma_kernels-$VERSION.dist-info/licenses/LICENSE"; do
  grep -q " *$f " <<< "$listing" || grep -q "^$f" <<< "$listing" || fail "the wheel lacks $f"
done
python3 - "$wheel" "$TMP/unpacked" << 'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = z.read(next(n for n in z.namelist() if n.endswith("METADATA"))).decode()
for dep in ("nvidia-cuda-runtime", "nvidia-cublas"):
    assert f"Requires-Dist: {dep}" in meta, f"the wheel does not declare {dep}"
z.extract("gemma_kernels/lib/libgk.so.0", sys.argv[2])
PY
# The library finds the CUDA wheels' libraries beside the package (site-packages/nvidia/cu13/lib).
readelf -d "$TMP/unpacked/gemma_kernels/lib/libgk.so.0" | grep -q 'RUNPATH.*\$ORIGIN/../../nvidia/cu13/lib' ||
  fail "libgk's RUNPATH does not name the nvidia wheels' folder"
if [ -n "$before" ] && [ "$(git -C "$ROOT" status --porcelain --ignored)" != "$before" ]; then
  fail "pip wheel changed the source tree: $(git -C "$ROOT" status --porcelain --ignored)"
fi

echo "== 2. install into a fresh virtual environment"
python3 -m venv "$TMP/venv"
"$TMP/venv/bin/python" -m pip install -q --no-deps --no-index "$wheel"
# In place of the nvidia-cuda-runtime wheel (not downloaded here): the toolkit's libcudart where that wheel puts it.
# The package must load that copy, not the system's.
site=$("$TMP/venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cudart=$(ldconfig -p | sed -n 's/.*libcudart\.so\.13 .*=> //p' | head -1)
[ -n "$cudart" ] || cudart=/usr/local/cuda/lib64/libcudart.so.13
mkdir -p "$site/nvidia/cu13/lib" && cp "$(readlink -f "$cudart")" "$site/nvidia/cu13/lib/libcudart.so.13"
# From another folder, so that nothing of the checkout is on the path; GK_LIBRARY unset: the wheel's own library.
(cd "$TMP" && env -u GK_LIBRARY -u PYTHONPATH "$TMP/venv/bin/python" - "$VERSION" << 'PY'
import sys
import gemma_kernels
want = sys.argv[1]
assert gemma_kernels.__version__ == want, (gemma_kernels.__version__, want)
assert gemma_kernels.library_version() == want, (gemma_kernels.library_version(), want)
assert "site-packages" in gemma_kernels.library()._name, gemma_kernels.library()._name
maps = open("/proc/self/maps").read()
assert "site-packages/nvidia/cu13/lib/libcudart.so.13" in maps, "libcudart was not taken from the nvidia wheel's place"
from gemma_kernels import solexecbench
assert solexecbench.sources(solexecbench.default_source_root(), "054")  # the export works from the wheel
print("   gemma_kernels", gemma_kernels.__version__, "from", gemma_kernels.library()._name)
PY
)

echo "== 3. CMake package and the C++ example"
cmake --install "$BUILD" --prefix "$TMP/install" > /dev/null
cmake -S "$ROOT/examples/cpp" -B "$TMP/example" -G Ninja -DCMAKE_PREFIX_PATH="$TMP/install" > /dev/null
cmake --build "$TMP/example" > /dev/null
[ -x "$TMP/example/gk_example" ] || fail "examples/cpp did not build"
if [ -x "$TMP/install/bin/gk" ]; then  # the installed tool finds the installed library
  "$TMP/install/bin/gk" --version | grep -q "libgk $VERSION" || fail "the installed gk does not run"
fi
echo "check-packaging: ok"
