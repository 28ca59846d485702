#!/usr/bin/env bash
# The RL step of the three-environment mix (configs/examples/three_envs.toml: the quickstart until
# it moved to the lean task; first timed at 10.5 s) on BASE (default e61592d, main at that first
# timing) and on this checkout, one after the other on the same machine, ROUNDS rounds
# alternating, plus this checkout with trainer.share_cores = false (what handing the cores over
# adds). Every run starts from the same warm model: a tiny one after the warm-up the quickstart had
# then (configs/examples/sft_warmup_three_envs.toml, made once). Prints each run's means over steps
# 3..STEPS-1 (step 1-2 warm up, the last step holds the held-out eval) and the ratio of each
# mean step time to BASE's of the same round. With LEAN=MODEL (a lean student, e.g.
# runs/reproduce/SET/bare-student/model) each round also times the lean task
# (experiments/configs/grpo_bare.toml, a trainer-bound step) with share_cores on and off.
#
#   bash bench/quickstart_step.sh           STEPS=20 ROUNDS=1 BASE=e61592d by default
#
# BASE is built once from `git archive` into runs/bench/quickstart_step/base (its own shim and
# dist/rlx, this checkout's node_modules); runs go to runs/bench/quickstart_step/ (ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-e61592d}
STEPS=${STEPS:-20}
ROUNDS=${ROUNDS:-1}
W=runs/bench/quickstart_step
BUN=$PWD/node_modules/.bin/bun
RLX=dist/rlx
mkdir -p $W
echo "quickstart_step: $(lscpu | sed -n 's/Model name: *//p'), $(nproc) cores, this checkout $(git describe --always --dirty=+changes), BASE $BASE, load $(cut -d' ' -f1-3 /proc/loadavg)"

source bench/_warm_three_envs.sh
warm_three_envs $W

if [ ! -x $W/base/dist/rlx ]; then
  echo "== building BASE $BASE"
  rm -rf $W/base && mkdir -p $W/base
  git archive "$BASE" | tar -x -C $W/base
  ln -s "$PWD/node_modules" $W/base/node_modules
  (cd $W/base && $BUN build.ts > build.log 2>&1) || { tail -20 $W/base/build.log; exit 1; }
fi

# run NAME BINARY CONFIG MODEL [--set ...]: STEPS steps of CONFIG; prints its step_times.ts line.
run() {
  local name=$1 binary=$2 config=$3 model=$4 out=$W/$1-r$round
  shift 4
  rm -rf "$out"
  "$binary" train "$config" --set output_dir="$out" --set model.path="$model" \
    --set max_steps="$STEPS" "$@" > "$out.log" 2>&1 || { tail -20 "$out.log"; exit 1; }
  $BUN bench/step_times.ts "$out" --from 3 --to $((STEPS - 1)) | tee "$out.times.json"
}
ratio() { # ratio LABEL A B: A's mean step over B's, from the two runs' step_times lines of this round
  $BUN -e 'const [a, b] = process.argv.slice(1, 3).map((p) => require(p));
    console.log(`round ${process.argv[4]}, ${process.argv[3]}: ${a.step_mean_s} s -> ${b.step_mean_s} s, ${(a.step_mean_s / b.step_mean_s).toFixed(2)}x; trainer idle ${a.trainer_idle} -> ${b.trainer_idle}`);' \
    "$PWD/$W/$2-r$round.times.json" "$PWD/$W/$3-r$round.times.json" "$1" "$round"
}

MIX=configs/examples/three_envs.toml
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round (load $(cut -d' ' -f1-3 /proc/loadavg))"
  run base $W/base/dist/rlx $MIX $W/warm/model
  run new $RLX $MIX $W/warm/model
  run new-fixed $RLX $MIX $W/warm/model --set trainer.share_cores=false
  ratio "the mix, BASE -> this checkout" base new
  ratio "the mix, BASE -> this checkout without share_cores" base new-fixed
  ratio "the mix, share_cores off -> on" new-fixed new
  if [ -n "${LEAN:-}" ]; then
    run lean-fixed $RLX experiments/configs/grpo_bare.toml "$LEAN" --set trainer.share_cores=false
    run lean $RLX experiments/configs/grpo_bare.toml "$LEAN"
    ratio "the lean task, share_cores off -> on" lean-fixed lean
  fi
done
