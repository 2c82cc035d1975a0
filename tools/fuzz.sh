#!/usr/bin/env bash
# Runs the libFuzzer targets of the asan-ubsan build (tests/fuzz/targets,
# docs/fuzzing.md) over seed corpora gathered from tests/, examples/ and,
# when present, ../shared.
#
#   tools/fuzz.sh [--runs N | --seconds S] [--seed K] [--ci] [--preset P] [TARGET...]
#
# Default: every target for 600 s each (--seconds), seeds from tests/,
# examples/ and ../shared; the inputs libFuzzer finds new coverage with are
# kept in build/asan-ubsan/fuzz/corpus/TARGET and reused by the next run.
# --ci (the bounded run meant for CI): seeds from tests/ and examples/ only, a fresh
# corpus, --runs 3000 with --seed 1 unless given, address-space randomisation
# off (setarch -R) so a run replays in its checkout. Crash inputs are written to
# build/asan-ubsan/fuzz/artifacts/TARGET/. Prints one line per target (runs
# executed, seconds, crashes) and exits 1 when any target crashed.
# --preset fuzz runs the targets of the fuzz preset (-O2, UBSan only: several
# times the executions per second, no memory-error detection) from build/fuzz;
# the default is asan-ubsan. Builds the targets first unless
# MESHSPLIT_FUZZ_NO_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
preset=asan-ubsan
runs=""
seconds=""
seed=1
ci=0
targets=()
while (($#)); do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --ci) ci=1; shift ;;
    --preset) preset=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: error: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
case $preset in
  asan-ubsan|fuzz) build=build/$preset ;;
  *) echo "fuzz.sh: error: --preset is asan-ubsan or fuzz, not $preset" >&2; exit 2 ;;
esac
if [[ -z $runs && -z $seconds ]]; then
  if ((ci)); then runs=3000; else seconds=600; fi
fi
all=(fuzz_hlo_parser fuzz_propagate fuzz_partition fuzz_shard_spec fuzz_npy fuzz_onnx)
((${#targets[@]})) || targets=("${all[@]}")

if [[ ${MESHSPLIT_FUZZ_NO_BUILD:-0} != 1 ]]; then
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$(nproc)" --target fuzz_targets
fi

shared=$root/../shared
work=$build/fuzz
mkdir -p "$work"

# seeds TARGET DIR: fills DIR with the seed inputs of TARGET (copies, small
# files only: libFuzzer mutates whole inputs, a megabyte seed makes every
# execution slow).
seeds() {
  local target=$1 dir=$2 f
  rm -rf "$dir"
  mkdir -p "$dir"
  local roots=(tests examples)
  ((ci)) || { [[ -d $shared ]] && roots+=("$shared"); }
  case $target in
    fuzz_hlo_parser|fuzz_propagate|fuzz_partition)
      find "${roots[@]}" -name '*.hlo' -size -64k -print0 ;;
    fuzz_shard_spec)
      find "${roots[@]}" -name '*.json' -size -16k -print0 ;;
    fuzz_npy)
      find "${roots[@]}" -name '*.npy' -size -64k -print0 ;;
    fuzz_onnx)
      for f in tests/fuzz/seeds/onnx/*.txtpb; do
        protoc --encode=onnx.ModelProto -I/usr/include/onnx /usr/include/onnx/onnx.proto \
          < "$f" > "$dir/$(basename "$f" .txtpb).onnx"
      done
      ((ci)) || find "$shared/models/onnx" -name '*.onnx' -size -4M -print0 2>/dev/null ;;
  esac | while IFS= read -r -d '' f; do
    cp "$f" "$dir/$(echo "$f" | tr '/' '_')"
  done
}

# What one execution covers depends on heap addresses (the order of
# pointer-keyed containers), so anything that moves them makes two runs of
# one build explore different inputs: address-space randomisation, and
# libFuzzer's corpus reload (-reload, every second by default), whose
# directory reads allocate at moments that depend on the clock. We run one
# process per corpus, so the reload finds nothing anyway: it is off. --ci
# also turns randomisation off where the kernel allows; a --ci run of one
# build then replays exactly from any directory and environment (a clone's
# own build was not compared: docs/fuzzing.md).
fixed_layout=()
if ((ci)) && setarch "$(uname -m)" -R true 2>/dev/null; then
  fixed_layout=(setarch "$(uname -m)" -R)
elif ((ci)); then
  echo "fuzz.sh: note: setarch -R is not permitted here; runs are not reproducible" >&2
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
status=0
summary=()
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/targets/$t
  if [[ ! -x $bin ]]; then
    summary+=("$t: not built (fuzz_onnx needs libonnx-dev)")
    continue
  fi
  seed_dir=$work/seeds/$t
  seeds "$t" "$seed_dir"
  corpus=$work/corpus/$t
  ((ci)) && rm -rf "$corpus"
  artifacts=$work/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  limit=()
  [[ -n $runs ]] && limit+=(-runs="$runs")
  [[ -n $seconds ]] && limit+=(-max_total_time="$seconds")
  log=$work/$t.log
  stamp=$work/$t.start
  touch "$stamp"
  start=$(date +%s)
  rc=0
  "${fixed_layout[@]}" "$bin" "$corpus" "$seed_dir" "${limit[@]}" -seed="$seed" -reload=0 \
    -timeout=30 -rss_limit_mb=4096 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts/" >"$log" 2>&1 || rc=$?
  elapsed=$(($(date +%s) - start))
  done_runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  crashes=$(find "$artifacts" -type f -newer "$stamp" | wc -l)
  line="$t: ${done_runs:-?} runs in ${elapsed} s, seeds $(ls "$seed_dir" | wc -l), crashes $crashes"
  if ((rc != 0 || crashes != 0)); then
    line+=" (exit $rc; log $log)"
    status=1
    grep -m1 -A12 'ERROR: \|fuzz property failed\|runtime error' "$log" >&2 || tail -20 "$log" >&2
  fi
  summary+=("$line")
done
printf 'fuzz: %s\n' "${summary[@]}"
exit $status
