#!/usr/bin/env bash
# README command (a), the main job: install what is missing, build, then
# partition a GPT-2-style training step (examples/gpt2, exported from PyTorch
# by tools/export_gpt2.py) over a 2 x 4 (data x model) mesh of virtual
# devices, verify the 8-device run against the single-device run, and print
# the plan report (per-device FLOPs and memory, every collective and its cause).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
tools/build.sh release
bin=build/release/src/cli/meshsplit
model=examples/gpt2/gpt2_train_step.onnx
spec=examples/gpt2/dp2_mp4.json
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== 1. partition $model over mesh data=2,model=4 ($spec)"
"$bin" partition "$model" --shard "$spec" >"$out/partitioned.hlo"
echo "SPMD program: $(grep -c ' = ' "$out/partitioned.hlo") instructions; collectives:"
grep -oE ' (all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)\(' \
  "$out/partitioned.hlo" | sort | uniq -c

echo
echo "== 2. verify: 8 virtual devices vs 1 device, random inputs (seed 0)"
"$bin" verify "$model" --shard "$spec" --seed 0

echo
echo "== 3. report"
"$bin" report "$model" --shard "$spec"
