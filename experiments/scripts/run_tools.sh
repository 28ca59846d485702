# Shell functions the experiment scripts share (sourced, not run): the newest published weights
# of a run, and a timed command whose wall time, load and commit go into a result row.

# last_weights RUN: the run's newest weights/step_N directory.
last_weights() { ls -d "$1"/weights/step_* | sort -t_ -k2 -n | tail -1; }

# timed LOG CMD...: runs CMD with its output in LOG; sets WALL (seconds), LOAD (load averages at the
# start) and COMMIT (the checkout it started from; +changes when tracked files differ from it).
timed() {
  local log=$1 t0
  shift
  LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
  COMMIT=$(git describe --always --abbrev=7 --dirty=+changes)
  t0=$(date +%s)
  "$@" > "$log" 2>&1 || { tail -20 "$log" >&2; echo "failed: $* (log: $log)" >&2; exit 1; }
  WALL=$(($(date +%s) - t0))
}
