#!/usr/bin/env bash
# Refactor guard: records what `meshsplit partition` and `meshsplit propagate`
# print (stdout, stderr, exit status) for every case of the XLA corpus in
# ../shared/conformance and every .hlo under tests/golden, so a change that
# must not change behaviour can be checked byte for byte.
#
#   tools/snapshot.sh write DIR [MESHSPLIT]    record into DIR (emptied first)
#   tools/snapshot.sh compare DIR [MESHSPLIT]  record into a temporary dir and
#                                              diff against DIR; exit 1 on any
#                                              difference
# MESHSPLIT defaults to build/release/src/cli/meshsplit. Paths are relative to
# the repository root, so snapshots taken in two worktrees compare equal.
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 2 ] || usage
mode=$1 dir=$2
bin=$(realpath "${3:-build/release/src/cli/meshsplit}")
[ -x "$bin" ] || { echo "snapshot: error: no meshsplit at $bin (build first)" >&2; exit 1; }
case $mode in write|compare) ;; *) usage ;; esac

corpus=../shared/conformance/xla
out=$dir
[ "$mode" = compare ] && out=$(mktemp -d)
rm -rf "$out" && mkdir -p "$out"

# One line per run: <output name> <args...>. Partitioning cases get the
# partition count, propagation and windowed-einsum options their header gives.
jobs=$(mktemp)
trap 'rm -f "$jobs"' EXIT
if [ -d "$corpus/partitioning" ]; then
  for f in "$corpus"/partitioning/*.hlo; do
    name=$(basename "$f" .hlo)
    n=$(sed -n 's|^// num_partitions=\([0-9]*\).*|\1|p' "$f" | head -1)
    args=(partition "$f" --num-partitions "${n:-1}")
    grep -q '^// pipeline:.*ShardingPropagation' "$f" || args+=(--no-propagate)
    opts=$(sed -n 's|^// options:\([^|]*\).*|\1|p' "$f" | head -1)
    if [[ $opts =~ threshold_for_windowed_einsum_mib[\ =\(]*([0-9]+) ]]; then
      args+=(--windowed-einsum-threshold $((BASH_REMATCH[1] << 20)) --windowed-einsum-reduce-scatter)
    fi
    [[ $opts =~ max_windowed_einsum_iteration\ *=\ *([0-9]+) ]] &&
      args+=(--windowed-einsum-max-iterations "${BASH_REMATCH[1]}")
    [[ $opts =~ bidirectional_windowed_einsum\ *=\ *true ]] && args+=(--windowed-einsum-bidirectional)
    echo "corpus-partition.$name ${args[*]}" >>"$jobs"
  done
fi
if [ -d "$corpus/propagation" ]; then
  for f in "$corpus"/propagation/*.hlo; do
    echo "corpus-propagate.$(basename "$f" .hlo) propagate $f" >>"$jobs"
  done
fi
while IFS= read -r f; do
  name=$(echo "${f#tests/golden/}" | tr '/' '.')
  echo "golden-partition.$name partition $f" >>"$jobs"
  echo "golden-propagate.$name propagate $f" >>"$jobs"
done < <(find tests/golden -name '*.hlo' | sort)
# The examples, partitioned and costed with the specs they ship with.
for s in examples/gpt2/*.json; do
  for cmd in partition report; do
    echo "example-$cmd.gpt2.$(basename "$s" .json) $cmd examples/gpt2/gpt2_train_step.onnx --shard $s" >>"$jobs"
  done
done
for f in examples/mlp.hlo examples/strategies/*.hlo; do
  for cmd in partition report; do echo "example-$cmd.$(basename "$f" .hlo) $cmd $f" >>"$jobs"; done
done
echo "example-partition.mlp_2d.spec partition examples/strategies/mlp_2d.hlo --shard examples/strategies/mlp_2d.shard.json" >>"$jobs"
if [ -f ../shared/models/hlo/maxtext_train_step_dp8.hlo ]; then
  for cmd in partition report; do
    echo "model-$cmd.maxtext $cmd ../shared/models/hlo/maxtext_train_step_dp8.hlo --num-partitions 8" >>"$jobs"
    echo "model-$cmd.maxtext.megatron $cmd ../shared/models/hlo/maxtext_train_step_dp8.hlo --shard examples/maxtext/megatron_dp8_mp4.json" >>"$jobs"
  done
fi

run_one() {
  local bin=$1 out=$2 name=$3
  shift 3
  local rc=0
  timeout 120 "$bin" "$@" >"$out/$name.out" 2>"$out/$name.err" || rc=$?
  echo "$rc" >"$out/$name.rc"
}
export -f run_one
xargs -P "$(nproc)" -L 1 bash -c 'run_one "$0" "$@"' "$bin" "$out" <"$jobs"
echo "snapshot: $(wc -l <"$jobs") runs in $out" >&2

if [ "$mode" = compare ]; then
  if diff -r "$dir" "$out" >"$out.diff"; then
    echo "snapshot: identical to $dir" >&2
    rm -rf "$out" "$out.diff"
  else
    echo "snapshot: DIFFERENT from $dir: $(grep -c '^diff\|^Only' "$out.diff") files; see $out.diff" >&2
    exit 1
  fi
fi
