#!/usr/bin/env bash
# Runs `meshsplit partition --check-collectives` (compiler/collective_check.h)
# over the XLA partitioning corpus in ../shared/conformance (with each case's
# partition count, propagation and windowed-einsum options, as
# tools/snapshot.sh reads them) and every .hlo under tests/golden, and counts
# the programs whose collectives disagree with their shardings.
#
#   tools/check_collectives.sh [MESHSPLIT]     prints one FAIL line per program
#                                              and a summary; exit 1 on any FAIL
# A program that does not partition (expected errors, refusals) is counted
# apart, not as a failure of the check.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-build/release/src/cli/meshsplit}")
[ -x "$bin" ] || { echo "check_collectives: error: no meshsplit at $bin (build first)" >&2; exit 1; }
corpus=../shared/conformance/xla/partitioning
ok=0 bad=0 refused=0 total=0 colls=0 compared=0
run() {  # name args...
  local name=$1; shift
  total=$((total + 1))
  local err
  if err=$("$bin" partition "$@" --check-collectives -o /dev/null 2>&1 >/dev/null); then
    ok=$((ok + 1))
    if [[ $err =~ collective\ check:\ ([0-9]+)\ collectives,\ ([0-9]+)\ compared ]]; then
      colls=$((colls + BASH_REMATCH[1])) compared=$((compared + BASH_REMATCH[2]))
    fi
  elif grep -q "collective check:" <<<"$err"; then
    bad=$((bad + 1))
    echo "FAIL $name: $(grep -A3 'collective check:' <<<"$err" | head -4 | tr '\n' ' ')"
  else
    refused=$((refused + 1))
  fi
}
if [ -d "$corpus" ]; then
  for f in "$corpus"/*.hlo; do
    n=$(sed -n 's|^// num_partitions=\([0-9]*\).*|\1|p' "$f" | head -1)
    args=("$f" --num-partitions "${n:-1}")
    grep -q '^// pipeline:.*ShardingPropagation' "$f" || args+=(--no-propagate)
    opts=$(sed -n 's|^// options:\([^|]*\).*|\1|p' "$f" | head -1)
    if [[ $opts =~ threshold_for_windowed_einsum_mib[\ =\(]*([0-9]+) ]]; then
      args+=(--windowed-einsum-threshold $((BASH_REMATCH[1] << 20)) --windowed-einsum-reduce-scatter)
    fi
    [[ $opts =~ max_windowed_einsum_iteration\ *=\ *([0-9]+) ]] &&
      args+=(--windowed-einsum-max-iterations "${BASH_REMATCH[1]}")
    [[ $opts =~ bidirectional_windowed_einsum\ *=\ *true ]] && args+=(--windowed-einsum-bidirectional)
    run "corpus/$(basename "$f")" "${args[@]}"
  done
else
  echo "check_collectives: $corpus not found, corpus skipped (it ships in ../shared)" >&2
fi
while IFS= read -r f; do run "$f" "$f"; done < <(find tests/golden -name '*.hlo' | sort)
echo "check-collectives: $total programs, $ok agree ($colls collectives, $compared compared with a sharding), $bad disagree, $refused did not partition"
[ "$bad" -eq 0 ]
