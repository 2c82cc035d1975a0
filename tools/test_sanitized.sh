#!/usr/bin/env bash
# The sanitized part of CI (.ci/run calls it after tools/test.sh): builds the
# asan-ubsan preset's `sanitized_tests` target (unit and differential test
# binaries, the CLI, the libFuzzer targets; nothing else) and runs, under
# AddressSanitizer + UndefinedBehaviorSanitizer, bounded slices sized so the
# steps after the build take about 10 minutes on 2 cores (measured
# 2026-12-03 at load 4-7: unit 381 s, lit errors/ 32 s + 1/3 of the rest
# 224 s, shardings 71 s, libFuzzer 3000 runs each 230 s; the slices were then
# cut to 1/6 and 1000 runs). A cold build of the target takes about 2170 CPU
# seconds (18 min on 2 idle cores):
#
#   unit         ctest -L 'unit|differential' on the asan build, minus EXCLUDE below
#   lit          lit shard --lit-shard of --lit-shards (tests/errors always whole)
#   shardings    meshsplit fuzz-shardings on the XLA partitioning corpus, a fixed
#                seed, --shardings-count variants of the cases under 1 MiB
#                (skipped, and said so, when ../shared is absent)
#   libfuzzer    tools/fuzz.sh --ci (every libFuzzer target, 3000 runs, fixed seed)
#
# Usage: tools/test_sanitized.sh [--jobs N] [--lit-shards M] [--lit-shard K]
#            [--shardings-count C] [--no-build] [--only STEP,...]
# Prints each step's wall time and a summary; exits 1 when any step failed,
# after running all of them (a sanitizer report fails the step that hit it:
# ASan and UBSan abort on the first error).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=build/asan-ubsan
jobs=$(nproc)
lit_shards=6
lit_shard=1
shardings_count=1
do_build=1
only=""
while (($#)); do
  case $1 in
    --jobs) jobs=$2; shift 2 ;;
    --lit-shards) lit_shards=$2; shift 2 ;;
    --lit-shard) lit_shard=$2; shift 2 ;;
    --shardings-count) shardings_count=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --only) only=$2; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test_sanitized.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# Unit tests that cannot give a meaningful answer under ASan, each with why.
# (ctest -E regex; keep one entry per line.)
exclude=(
  # Wall-clock thresholds of 50-100 ms that prove iota queries do no
  # per-device work, calibrated for the release build; ASan + UBSan run them
  # 2-5x slower (measured 60 ms against the 50 ms bound). tools/test.sh runs
  # them on the release build.
  'TileAssignment\.LargeIotaQueriesAreSymbolic'
  'TileAssignment\.HugeIotaQueriesAreSymbolic'
  'ShardingQueries\.LargeIotaNoPerDeviceWork'
)
# ThreadsBigMeshTest.DeviceStacksShrinkAndAllDevicesRun runs again: its
# 1 MiB device stacks overflowed under ASan because ReduceInOrder's frame
# held every inlined kernel's 16 KiB chunk buffer (1,533,944 bytes by
# clang-15 -O1 ASan -fstack-usage); the buffer is now on the heap (504 bytes;
# measured on the one object file, the test itself not yet run under ASan).

# abort_on_error: a report ends the process with SIGABRT, which ctest, lit's
# `not` and libFuzzer all count as a crash (ASan's default exit status 1
# would pass `not %meshsplit` tests). allocator_may_return_null: a huge
# allocation from a hostile shape throws std::bad_alloc as in the release
# build, rather than being an ASan report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:disable_coredump=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}
if [[ -z ${ASAN_SYMBOLIZER_PATH:-} ]] && command -v llvm-symbolizer-15 >/dev/null; then
  export ASAN_SYMBOLIZER_PATH=$(command -v llvm-symbolizer-15)
fi

summary=()
status=0
# step NAME COMMAND...: runs one step unless --only leaves it out, records
# its wall time and verdict.
step() {
  local name=$1
  shift
  if [[ -n $only && ,$only, != *,$name,* ]]; then
    return 0
  fi
  echo "=== test_sanitized: $name: $*" >&2
  local start rc=0
  start=$(date +%s)
  "$@" || rc=$?
  local t=$(($(date +%s) - start))
  local verdict=passed
  if ((rc == 77)); then
    verdict=skipped
  elif ((rc != 0)); then
    verdict="FAILED (exit $rc)"
    status=1
  fi
  echo "=== test_sanitized: $name: $verdict in ${t} s" >&2
  summary+=("$(printf '%-10s %6d s  %s' "$name" "$t" "$verdict")")
}

build_step() {
  cmake --preset asan-ubsan >/dev/null &&
    cmake --build --preset asan-ubsan -j "$jobs" --target sanitized_tests
}

unit_step() {
  local args=(--test-dir "$build" -L '^(unit|differential)$' -j "$jobs" --timeout 900
              --output-on-failure --no-tests=error)
  if ((${#exclude[@]})); then
    local IFS='|'
    args+=(-E "^(${exclude[*]})\$")
  fi
  ctest "${args[@]}"
}

lit_step() {
  local lit=/usr/lib/llvm-14/build/utils/lit/lit.py rc=0
  # Every diagnostic test (bad input is where memory errors live), then one
  # shard of the rest.
  python3 "$lit" -s --show-unsupported "$build/tests" --filter ':: errors/' || rc=1
  python3 "$lit" -s --show-unsupported "$build/tests" --filter-out ':: errors/' \
    --num-shards "$lit_shards" --run-shard "$lit_shard" || rc=1
  return $rc
}

shardings_step() {
  local corpus=$root/../shared/conformance/xla/partitioning
  if [[ ! -d $corpus ]]; then
    echo "skipped: needs ../shared/conformance/xla/partitioning (absent: $corpus)"
    return 77
  fi
  local work=$build/fuzz_shardings_sanitized
  rm -rf "$work"
  mkdir -p "$work"
  "$build/src/cli/meshsplit" fuzz-shardings "$corpus" --seed 1 --count "$shardings_count" \
    --max-case-mib 1 --out "$work/variants" --timeout 60
}

fuzz_step() {
  # fuzz.sh sets its own sanitizer options (leaks on, bad_alloc allowed)
  # and reads crashes from libFuzzer's artifacts.
  env -u ASAN_OPTIONS -u UBSAN_OPTIONS MESHSPLIT_FUZZ_NO_BUILD=1 tools/fuzz.sh --ci
}

total_start=$(date +%s)
((do_build)) && step build build_step
step unit unit_step
step lit lit_step
step shardings shardings_step
step libfuzzer fuzz_step
echo "test_sanitized: summary (wall time per step)"
printf '  %s\n' "${summary[@]}"
echo "test_sanitized: total $(($(date +%s) - total_start)) s"
exit $status
