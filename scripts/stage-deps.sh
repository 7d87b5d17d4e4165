#!/usr/bin/env bash
# Copies the header-only dependencies (CLI11, nlohmann/json) from this machine's system include directory into
# .deps/include, so the project configures and builds offline on a machine that lacks them (the GPU machine):
#   scripts/stage-deps.sh   # here, then carry .deps to the other machine
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps/include
for d in CLI nlohmann; do
  [ -d "/usr/include/$d" ] || { echo "stage-deps: /usr/include/$d missing; run scripts/install-deps.sh" >&2; exit 1; }
  rm -rf ".deps/include/$d"
  cp -r "/usr/include/$d" .deps/include/
done
echo "stage-deps: headers in .deps/include"
