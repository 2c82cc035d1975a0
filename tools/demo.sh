#!/usr/bin/env bash
# README command (a), the main job: install what is missing, build, and run an
# example module, printing its result.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
tools/build.sh release
bin=build/release/src/cli/meshsplit
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "== meshsplit run examples/mlp.hlo (inputs examples/mlp.inputs/)"
"$bin" run examples/mlp.hlo --inputs examples/mlp.inputs --outputs "$out" --print
