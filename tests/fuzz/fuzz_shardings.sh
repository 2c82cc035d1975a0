#!/usr/bin/env bash
# Sharding-mutation fuzzing of a fixed subset of the XLA partitioning corpus
# (meshsplit fuzz-shardings, docs/fuzzing.md): a fixed seed, 4 variants per
# case, every case that runs in 16 MiB at its own or shrunk shapes (about
# 290 of 323, 1,144 variants; ~30 s of one core). Fails on any wrong result,
# partitioner error or crash (timeouts are listed but do not fail); exits
# 77 (ctest: skipped) when the shared corpus is absent.
#
# Usage: fuzz_shardings.sh MESHSPLIT CORPUS_DIR WORK_DIR
set -euo pipefail
meshsplit=$1
corpus=$2
work=$3
if [[ ! -d "$corpus" ]]; then
  echo "skipped: needs ../shared/conformance/xla/partitioning (absent: $corpus);" \
       "README, 'Optional test data', says how to get it"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
"$meshsplit" fuzz-shardings "$corpus" --seed 1 --count 4 --max-case-mib 16 \
  --out "$work/variants" --timeout 20
