#!/bin/sh
# Rank 0 (the only rank that reads inputs) sees bad inputs (a wrong shape in
# its --inputs directory): every rank must exit non-zero within 10 s with a
# message naming that rank, and no output may be written. First, a positive
# check that the other ranks read nothing: rank 1 given a directory that does
# not exist must not matter.
# Usage: rank_failure.sh MESHSPLIT MPIEXEC MODULE WORKDIR
set -u
meshsplit=$1 mpiexec=$2 module=$3 work=$4
here=$(dirname "$0")
rm -rf "$work" && mkdir -p "$work/good" "$work/bad" "$work/out"
python3 "$here/npy_inputs.py" "$module" "$work/good" 1 || exit 1
python3 "$here/npy_inputs.py" "$module" "$work/bad" 1 x=3,3 || exit 1
cp "$work/good/w.npy" "$work/bad/w.npy"
# Rank 1 (Open MPI: OMPI_COMM_WORLD_RANK; MPICH/Hydra: PMI_RANK) gets a
# missing directory: the run must still succeed.
mkdir -p "$work/ok"
timeout 10 "$mpiexec" --oversubscribe --allow-run-as-root -np 2 sh -c '
  r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
  d=$0/good; [ "$r" = 1 ] && d=$0/missing
  exec "$1" run "$2" --inputs "$d" --outputs "$0/ok" --num-partitions 2 --backend mpi' \
  "$work" "$meshsplit" "$module" || { echo "FAIL: rank 1 needed inputs"; exit 1; }
[ -s "$work/ok/out0.npy" ] || { echo "FAIL: no output from the positive run"; exit 1; }
# Rank 0 reads bad/.
timeout 10 "$mpiexec" --oversubscribe --allow-run-as-root -np 2 sh -c '
  r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
  d=$0/good; [ "$r" = 0 ] && d=$0/bad
  "$1" run "$2" --inputs "$d" --outputs "$0/out" --num-partitions 2 --backend mpi
  rc=$?; echo "rank $r exit $rc"; exit $rc' "$work" "$meshsplit" "$module" >"$work/log" 2>&1
rc=$?
cat "$work/log"
[ "$rc" -ne 124 ] || { echo "FAIL: timed out"; exit 1; }
[ "$rc" -ne 0 ] || { echo "FAIL: mpirun exited 0"; exit 1; }
grep -q "rank 0: .*x.npy" "$work/log" || { echo "FAIL: no message naming rank 0 and x.npy"; exit 1; }
# mpirun may kill rank 0 before it reports its own exit; no rank may succeed.
! grep -q 'exit 0' "$work/log" || { echo "FAIL: a rank exited 0"; exit 1; }
[ -z "$(ls -A "$work/out")" ] || { echo "FAIL: outputs were written"; exit 1; }
echo "every rank failed cleanly"
