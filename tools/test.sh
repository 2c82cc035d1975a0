#!/usr/bin/env bash
# README command (b): install what is missing, build, run every test (CTest:
# GoogleTest unit tests and lit golden/diagnostic tests).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
tools/build.sh release
ctest --preset release -j "$(nproc)" "$@"
