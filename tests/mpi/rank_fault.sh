#!/bin/sh
# Kills (MODE=kill: SIGKILL) or freezes (MODE=stop: SIGSTOP) rank 1 of a
# 2-rank `run --backend mpi` while both ranks are inside a long loop of
# all-reduces. Every rank must end within 10 s of the fault, mpirun must exit
# non-zero, the surviving rank must say why, and no output file may exist.
# A killed rank is noticed by mpirun itself; a frozen one only by the other
# rank's watchdog (MESHSPLIT_MPI_TIMEOUT, set to 2 s here).
# Usage: rank_fault.sh kill|stop MESHSPLIT MPIEXEC MODULE WORKDIR
set -u
mode=$1 meshsplit=$2 mpiexec=$3 module=$4 work=$5
here=$(dirname "$0")
rm -rf "$work" && mkdir -p "$work/in" "$work/out"
python3 "$here/npy_inputs.py" "$module" "$work/in" 3 x0=128,256 || exit 1
fail() { echo "FAIL: $*"; cat "$work/log"; kill -9 "$mpirun_pid" 2>/dev/null; exit 1; }
alive() { kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
# CPU seconds (user + system) a process has used, in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# Each rank records its pid, then becomes meshsplit (exec keeps the pid).
MESHSPLIT_MPI_TIMEOUT=2 "$mpiexec" --oversubscribe --allow-run-as-root -np 2 sh -c '
  echo $$ > "$0/pid.${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}"
  exec "$@"' "$work" "$meshsplit" run "$module" --partitioned --inputs "$work/in" \
  --outputs "$work/out" --backend mpi >"$work/log" 2>&1 &
mpirun_pid=$!

# Wait until rank 1 has used 0.4 s of CPU: past start-up (parsing, MPI_Init
# take well under 0.1 s) and into the loop, where it computes a dot or waits
# (busy-polling) in an all-reduce.
i=0
while :; do
  i=$((i + 1))
  [ "$i" -le 600 ] || fail "rank 1 did not get going within 60 s"
  alive "$mpirun_pid" || fail "mpirun ended before the fault was injected"
  if [ -s "$work/pid.1" ] && [ -s "$work/pid.0" ]; then
    pid1=$(cat "$work/pid.1") pid0=$(cat "$work/pid.0")
    [ "$(ticks "$pid1")" -ge 40 ] && break
  fi
  sleep 0.1
done
alive "$pid0" || fail "rank 0 was not running when rank 1 was hit"
if [ "$mode" = kill ]; then kill -KILL "$pid1"; else kill -STOP "$pid1"; fi
echo "rank 1 (pid $pid1): $mode after $(ticks "$pid1") CPU ticks"

# Everything must be over within 10 s.
i=0
while alive "$mpirun_pid"; do
  i=$((i + 1))
  [ "$i" -le 100 ] || { kill -9 "$pid1" "$pid0" 2>/dev/null; fail "still running 10 s after the fault (hang)"; }
  sleep 0.1
done
wait "$mpirun_pid"
rc=$?
echo "mpirun exited $rc after about $((i / 10)).$((i % 10)) s"
cat "$work/log"
[ "$rc" -ne 0 ] || fail "mpirun exited 0"
! alive "$pid0" || fail "rank 0 is still running"
! alive "$pid1" || fail "rank 1 is still running"
[ -z "$(ls -A "$work/out")" ] || fail "output files were written: $(ls -A "$work/out")"
if [ "$mode" = kill ]; then
  grep -q "rank 1 .*signal 9" "$work/log" || fail "mpirun did not report rank 1's death"
  # Rank 0 learns of it from mpirun's SIGTERM or, if its own MPI call fails
  # first, from our MPI error handler; either way it must say so.
  grep -Eq "error: rank 0: (terminated by SIGTERM|MPI error in)" "$work/log" ||
    fail "rank 0 did not report why it ended"
else
  grep -q "error: rank 0: waited [0-9.]* s in all-reduce" "$work/log" ||
    fail "rank 0's watchdog did not report the wait"
fi
echo "every rank ended cleanly after the $mode"
