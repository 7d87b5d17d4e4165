#!/usr/bin/env bash
# Installs what the build needs on Debian/Ubuntu (the CUDA 13 toolkit itself is assumed present: nvcc, cuBLASLt).
# Idempotent; uses sudo when not root.
set -euo pipefail
PKGS=(cmake ninja-build g++ libgtest-dev libcli11-dev nlohmann-json3-dev python3 python3-venv python3-pip)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" > /dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# pytest for the Python package's tests, for the python3 on PATH (a pyenv or venv interpreter may not see the
# Debian package).
if ! python3 -c "import pytest" > /dev/null 2>&1; then
  python3 -m pip install --quiet pytest 2> /dev/null || {
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends python3-pytest
  }
fi
# scikit-build-core for `pip wheel .` without build isolation (the packaging test builds offline). Where pip may not
# install into this python3 (a distribution's externally managed one), the packaging test reports as skipped.
if ! python3 -c "import scikit_build_core" > /dev/null 2>&1; then
  python3 -m pip install --quiet "scikit-build-core>=0.10" 2> /dev/null ||
    echo "install-deps: scikit-build-core not installed for $(command -v python3) (pip refused); the packaging test will skip"
fi
command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ] || {
  echo "install-deps: the CUDA toolkit (nvcc, 13.0 or newer) is required and was not found" >&2; exit 1; }
command -v nvcc > /dev/null ||
  echo "install-deps: nvcc is not on PATH; CMake takes /usr/local/cuda/bin/nvcc (export PATH=/usr/local/cuda/bin:\$PATH for the shell)"
echo "install-deps: ok"
