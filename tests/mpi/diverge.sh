#!/bin/sh
# Ranks that run the same program but fall out of step mid-run (as a
# partitioner bug could make them) must both fail within 10 s with the
# backend's message, and write nothing. CASE picks the divergence:
#   trip  diverge_trip.hlo: device 1 runs one more 64 KiB all-reduce than
#         device 0 (caught by the end-of-run history check against the extra
#         collective's agreement; before it, this hung until the watchdog)
#   trip3 diverge_trip3.hlo: the same at 3 ranks (devices 1 and 2 run one and
#         two more), where the agreement is point to point
#   args  diverge_args.hlo: the same all-reduce with 2 elements on device 0
#         and 1 on device 1, both small enough to be inlined in the envelope
# Usage: diverge.sh CASE MESHSPLIT MPIEXEC WORKDIR
set -u
case=$1 meshsplit=$2 mpiexec=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work/in" "$work/out"
fail() { echo "FAIL: $*"; cat "$work/log"; exit 1; }
case $case in
  trip) module=$here/diverge_trip.hlo shapes=x0=128,256 np=2 ;;
  trip3) module=$here/diverge_trip3.hlo shapes=x0=96,256 np=3 ;;
  args) module=$here/diverge_args.hlo shapes= np=2 ;;
  *) echo "unknown case $case"; exit 2 ;;
esac
# shellcheck disable=SC2086
python3 "$here/npy_inputs.py" "$module" "$work/in" 1 $shapes || exit 1
start=$(date +%s)
timeout 10 "$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$meshsplit" run "$module" \
  --partitioned --num-partitions "$np" --inputs "$work/in" --outputs "$work/out" --backend mpi \
  >"$work/log" 2>&1
rc=$?
echo "mpirun exited $rc after $(($(date +%s) - start)) s"
cat "$work/log"
[ "$rc" -ne 124 ] || fail "timed out (hang)"
[ "$rc" -ne 0 ] || fail "mpirun exited 0"
grep -q "error: rank [0-2]: device [0-2]: devices disagree on a collective" "$work/log" ||
  fail "no rank reported the divergence"
[ -z "$(ls -A "$work/out")" ] || fail "output files were written"
echo "the divergence ($case) ended every rank"
