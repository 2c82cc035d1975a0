#!/bin/sh
# Runs one module with `--backend threads` and with `--backend mpi` under
# mpirun and requires every output .npy to be byte-identical.
# With NEEDS_SHARED=SUB (a path under ../shared that MODULE is made from,
# by another test) it exits 77 (ctest: skipped) when that path is absent.
# Usage: backend_diff.sh MESHSPLIT MPIEXEC NP MODULE WORKDIR "RUN FLAGS" [NAME=D0,D1 ...]
set -eu
meshsplit=$1 mpiexec=$2 np=$3 module=$4 work=$5 flags=$6
shift 6
here=$(dirname "$0")
if [ -n "${NEEDS_SHARED:-}" ] && [ ! -e "$here/../../../shared/$NEEDS_SHARED" ]; then
  echo "skipped: needs ../shared/$NEEDS_SHARED (absent beside $(cd "$here/../.." && pwd));" \
       "README, 'Optional test data', says how to get it"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work/in" "$work/threads" "$work/mpi"
python3 "$here/npy_inputs.py" "$module" "$work/in" 7 "$@"
# shellcheck disable=SC2086
"$meshsplit" run "$module" --inputs "$work/in" --outputs "$work/threads" $flags --backend threads
# shellcheck disable=SC2086
"$mpiexec" --oversubscribe --allow-run-as-root -np "$np" \
  "$meshsplit" run "$module" --inputs "$work/in" --outputs "$work/mpi" $flags --backend mpi
n=0
for f in "$work/threads"/*.npy; do
  cmp "$f" "$work/mpi/$(basename "$f")"
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "no outputs were written"; exit 1; }
[ "$(ls "$work/mpi" | wc -l)" -eq "$n" ] || { echo "mpi wrote a different number of outputs"; exit 1; }
echo "identical: $n output(s), np=$np, $(basename "$module")"
