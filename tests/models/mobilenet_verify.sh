#!/usr/bin/env bash
# Verifies MobileNet-V2's training step (the shared torch_xla module) with
# batch sharding over 2 devices and with its image height split over 4:
# shrinks the batch from 96 to 2, makes an f64 copy, writes the inputs whose
# role the generator cannot see (tools/mobilenet_inputs.py) and lets verify
# draw the weights by fan-in. Fails on any mismatch; exits 77 (ctest: skipped)
# when the shared models are not there. docs/models.md explains each step.
#
# Usage: mobilenet_verify.sh MESHSPLIT MODEL.hlo WORK_DIR
source "$(dirname "$0")/model_args.sh"
"$meshsplit" shrink-batch "$model" --param p5.6 --factor 48 > "$work/mobilenet_b2.hlo"
# f32 does not verify: rounding-level differences flip ReLU6's backward
# masks (compare x >= 0, x <= 6) for the few activations that lie within
# rounding of 0 or 6, and each flip changes a gradient by a whole term. In
# f64 no activation is that close, so the training step must match.
sed 's/f32/f64/g' "$work/mobilenet_b2.hlo" > "$work/mobilenet_b2_f64.hlo"
python3 "$repo/tools/mobilenet_inputs.py" --f64 "$model" "$work/inputs"

status=0
for spec in batch2 h4; do
  echo "== $spec"
  if ! "$meshsplit" verify "$work/mobilenet_b2_f64.hlo" --shard "$here/mobilenet/$spec.json" \
      --init fan-in --inputs "$work/inputs" --seed 0 > "$work/$spec.out" 2>&1; then
    status=1
  fi
  cat "$work/$spec.out"
  grep -q '^OK: ' "$work/$spec.out" || status=1
done
exit $status
