#!/bin/sh
# Ranks started with different programs must all fail with one clear message
# within 10 s, and write nothing. CASE picks what rank 1 gets differently:
#   module      another module file (same parameters, different computation)
#   partitions  --num-partitions 3 instead of 2
#   seed        verify --seed 2 instead of 1 (different inputs)
#   missing     a module file that does not exist (rank 1 fails before MPI)
# Usage: different_programs.sh CASE MESHSPLIT MPIEXEC WORKDIR
set -u
case=$1 meshsplit=$2 mpiexec=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work/in" "$work/out"
python3 "$here/npy_inputs.py" "$here/two_way.hlo" "$work/in" 1 || exit 1
fail() { echo "FAIL: $*"; cat "$work/log"; exit 1; }

a="$here/two_way.hlo" b=$a cmd=run np0=2 np1=2 seed0=1 seed1=1
expect_all=yes
case $case in
  module) b="$here/two_way_other.hlo"
          msg="ranks run different programs: rank 1's partitioned module differs from rank 0's" ;;
  partitions) np1=3
          msg="rank 1: backend 'mpi' needs one rank per partition: the module has 3 partitions" ;;
  seed) cmd=verify seed1=2
          msg="ranks run different programs: rank 1's seed differs from rank 0's" ;;
  missing) b="$work/missing.hlo" expect_all=no
          msg="error: cannot open '$work/missing.hlo'" ;;
  *) echo "unknown case $case"; exit 2 ;;
esac
if [ "$cmd" = run ]; then
  extra0="--inputs $work/in --outputs $work/out" extra1=$extra0
else
  extra0="--seed $seed0" extra1="--seed $seed1"
fi

# When the ranks agree on the failure, each must exit 1 by itself. Open
# MPI's mpirun would kill the slower rank as soon as the first exits non-zero
# (racing with its report), so in those cases it is told not to, and the
# test checks every rank's own exit status instead of mpirun's (which is
# then 0). A rank that hung would hit the 10 s timeout.
mca=
[ "$expect_all" = yes ] && mca="--mca orte_abort_on_non_zero_status 0"
start=$(date +%s)
# shellcheck disable=SC2086
timeout 10 "$mpiexec" $mca --oversubscribe --allow-run-as-root -np 2 sh -c '
  r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
  if [ "$r" = 1 ]; then f=$2 n=$4 x=$6; else f=$1 n=$3 x=$5; fi
  # shellcheck disable=SC2086
  "$0" "$7" "$f" --num-partitions "$n" --backend mpi $x
  rc=$?; echo "rank $r exit $rc"; exit $rc' \
  "$meshsplit" "$a" "$b" "$np0" "$np1" "$extra0" "$extra1" "$cmd" >"$work/log" 2>&1
rc=$?
echo "mpirun exited $rc after $(($(date +%s) - start)) s"
cat "$work/log"
[ "$rc" -ne 124 ] || fail "timed out (hang)"
[ "$expect_all" = yes ] || [ "$rc" -ne 0 ] || fail "mpirun exited 0"
! grep -q "exit 0" "$work/log" || fail "a rank exited 0"
grep -qF "$msg" "$work/log" || fail "no message: $msg"
if [ "$expect_all" = yes ]; then
  # The mismatch is agreed: both ranks report it and exit 1 by themselves.
  for r in 0 1; do
    grep -q "rank $r exit 1" "$work/log" || fail "rank $r did not exit 1 by itself"
  done
  # `run` reports on every rank; `verify` prints its verdict on rank 0 only.
  [ "$cmd" = verify ] || [ "$(grep -cF "$msg" "$work/log")" -ge 2 ] ||
    fail "not every rank printed: $msg"
fi
[ -z "$(ls -A "$work/out")" ] || fail "output files were written"
echo "every rank failed cleanly ($case)"
