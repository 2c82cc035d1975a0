#!/usr/bin/env bash
# Verifies the MaxText training step (the shared JAX module) on its own 8-way
# data parallelism and on data=8 x model=4 with Megatron weights
# (examples/maxtext/megatron_dp8_mp4.json): the module is far too large to
# run here (its weights and Adam moments alone are gigabytes), so
# `shrink-shapes --divisor 128` makes every large dim about 1/128 of its size
# while keeping each tile count dividing (with --shard, the spec's too), and
# the copy runs in f64. In bf16 the model-parallel partial sums round
# differently from one device's dot, by a few bf16 ulps per layer, which is
# not a partitioning error; in f64 the training step must match. Fails on
# any mismatch; exits 77 (ctest: skipped) when the shared models are absent.
# docs/models.md has the numbers.
#
# Then pipelined (docs/pipeline.md): both scans over 2 stages beside data=8
# (examples/maxtext/pipeline_dp8_pp2.json, 16 devices) and over 4 stages
# (data=8,stage=4, 32 devices), 2 microbatches, and the circular schedule
# over 2 stages (2 chunks of 2 layers per device), and 1f1b and zb-h1 over
# 4 stages with 4 microbatches (both scans in one loop of ticks, the loss
# gradient of each microbatch computed on the last stage; zb-h1 runs each
# backward as B and a later W), the stage buffers filled
# with NaN so that nothing computed in a bubble may reach a result.
#
# Usage: maxtext_verify.sh MESHSPLIT MODEL.hlo WORK_DIR
source "$(dirname "$0")/model_args.sh"

status=0
echo '{"mesh": {"data": 8, "stage": 4}, "existing_axes": ["data"], "rules": [],
       "pipeline": {"axis": "stage", "microbatches": 2}}' > "$work/pipeline_dp8_pp4.json"
for mesh in dp8 dp8_mp4 dp8_pp2 dp8_pp2_circular dp8_pp4 dp8_pp4_1f1b dp8_pp4_zb; do
  shard=()
  pipeline=()
  case $mesh in
    dp8_mp4) shard=(--shard "$repo/examples/maxtext/megatron_dp8_mp4.json") ;;
    dp8_pp2) shard=(--shard "$repo/examples/maxtext/pipeline_dp8_pp2.json")
             pipeline=(--mesh data=8,stage=2 --pipeline axis=stage,microbatches=2) ;;
    dp8_pp2_circular) shard=(--shard "$repo/examples/maxtext/pipeline_dp8_pp2.json")
             pipeline=(--mesh data=8,stage=2 --pipeline axis=stage,microbatches=2,schedule=circular,repeats=2) ;;
    dp8_pp4) shard=(--shard "$work/pipeline_dp8_pp4.json")
             pipeline=(--mesh data=8,stage=4 --pipeline axis=stage,microbatches=2) ;;
    dp8_pp4_1f1b) shard=(--shard "$work/pipeline_dp8_pp4.json")
             pipeline=(--mesh data=8,stage=4 --pipeline axis=stage,microbatches=4,schedule=1f1b) ;;
    dp8_pp4_zb) shard=(--shard "$work/pipeline_dp8_pp4.json")
             pipeline=(--mesh data=8,stage=4 --pipeline axis=stage,microbatches=4,schedule=zb-h1) ;;
  esac
  "$meshsplit" shrink-shapes "$model" --propagate --divisor 128 "${shard[@]}" \
      > "$work/$mesh.hlo" 2> "$work/$mesh.shrink.log"
  sed 's/bf16/f64/g; s/f32/f64/g' "$work/$mesh.hlo" > "$work/${mesh}_f64.hlo"
  echo "== $mesh"
  # The shrunk copy carries the spec's shardings; a pipelined run takes the
  # spec's mesh and pipeline again as flags.
  if ! "$meshsplit" verify "$work/${mesh}_f64.hlo" --seed 0 "${pipeline[@]}" > "$work/$mesh.out" 2>&1; then
    status=1
  fi
  cat "$work/$mesh.out"
  grep -q '^OK: ' "$work/$mesh.out" || status=1
done
exit $status
