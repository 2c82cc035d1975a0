#!/usr/bin/env bash
# README command (b): install what is missing, build, run every test (CTest:
# GoogleTest unit tests and lit golden/diagnostic tests), then list what was
# skipped and why (tests that need ../shared skip without it; see README,
# "Optional test data").
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
tools/build.sh release
status=0
ctest --preset release -j "$(nproc)" --output-junit ctest-junit.xml \
  --test-output-size-passed 262144 "$@" || status=$?
python3 tools/test_summary.py build/release/ctest-junit.xml
exit $status
