# Shell functions the experiment scripts share (sourced, not run): the newest published weights
# of a run, a timed command whose wall time, load and commit go into a result row, and the role
# warm starts of the multi-agent experiments.

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

# role_warm_start ENV N: the multi-agent warm start of ENV under runs/multi_agent (docs/results.md
# §13): the tiny byte-level model with the bare template, N demonstrations of the env's formats
# (role_demos.ts), SFT until experiments/configs/sft_ENV_warmup.toml's band; each part built once.
role_warm_start() {
  local out=runs/multi_agent
  mkdir -p $out
  [ -f $out/tiny-bare/config.json ] ||
    $RLX init --preset tiny --out $out/tiny-bare --chat-template configs/templates/bare.jinja > /dev/null
  [ -s $out/$1-demos.jsonl ] || node_modules/.bin/bun experiments/scripts/role_demos.ts $1 $out/$1-demos.jsonl $2
  [ -f $out/sft-$1/model/config.json ] || $RLX sft experiments/configs/sft_$1_warmup.toml --force 2>&1 | tee $out/sft-$1.log
}
