#!/usr/bin/env bash
# Samplers on a task with a spread of difficulty (docs/task_samplers.md): GRPO on 2-digit addition and
# subtraction mixed, from reproduce.sh's band-defined subtraction student (8d's: it solves about
# half the additions and samples `-` sometimes, so most subtraction groups are all wrong), with
# experiments/configs/grpo_addsub.toml's recipe (32 prompts x 8, lr 1e-4), at SEEDS (default 0 1):
#
#   uniform      the default: every drawn group trains
#   filter       the gate: groups whose rewards are all equal are replaced by fresh ones
#   curriculum   tasks weighed by their last pass rate (near 0.5 preferred, solved ones retired)
#   replay       a quarter of the draws are groups with signal from the last 2 versions
#
# Every sampler gets the same budget of GENERATED rollouts, 40 x 256 = 10,240 (what uniform spends
# in 40 steps): runs go in chunks of 5 steps (--resume --set max_steps=N) until their generated
# rollouts (sampling_budget.ts: fresh groups drawn, admitted or rejected) reach it, so the filter
# trains fewer steps and replay more. Each run is scored by `rlx eval` on 200 held-out tasks of
# each operation (greedy pass@1; pass@1 and pass@8 from 8 samples at T = 1); row.ts writes one
# JSON per run under experiments/results/sampling/SET/ with the budget (steps, generated rollouts, the
# mean share of trained groups with signal) beside it. Wall time is in each row. Runs go to
# runs/sampling/SET/ (ignored); a run whose row exists is not run again.
#
# POOL=N draws the training tasks from a pool of N (math's train_size; the default pool is ~11,000
# tasks, so a run of 1,280 draws almost never meets a task twice and per-task statistics never
# build up); its runs and rows go to SET-poolN. SAMPLERS picks which of the four run.
#
#   bash experiments/scripts/reproduce.sh SET     first (it builds runs/reproduce/SET/sub-student)
#   bash experiments/scripts/sampling.sh SET
#   POOL=200 SAMPLERS="uniform curriculum" bash experiments/scripts/sampling.sh SET
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/scripts/run_tools.sh
RLX=${RLX:-dist/rlx}
BUN=node_modules/.bin/bun
SET=${1:?usage: sampling.sh SET   (the SET reproduce.sh built the students in)}
SEEDS=${SEEDS:-0 1}
SAMPLERS=${SAMPLERS:-uniform filter curriculum replay}
STUDENT=runs/reproduce/$SET/sub-student/model
NAME=$SET${POOL:+-pool$POOL}
OUT=runs/sampling/$NAME
ROWS=experiments/results/sampling/$NAME
POOL_ARGS=(${POOL:+--set "orchestrator.train.env[0].args.train_size=$POOL"})
BUDGET=$((40 * 256))
ADD='{"operations": ["+"], "word_problems": false}'
SUB='{"operations": ["-"], "word_problems": false, "train_size": 3000}'
[ -f $STUDENT/config.json ] || { echo "no $STUDENT: run experiments/scripts/reproduce.sh $SET first" >&2; exit 2; }
mkdir -p $OUT $ROWS

evaluate() { [ -s "$3" ] || $RLX eval --model "$1" --env math --args "$2" --n 200 --k 8 --max-tokens 48 --seed 0 --out "$3" > /dev/null; }
generated() { $BUN experiments/scripts/sampling_budget.ts "$1" 8 | sed 's/.*"generated":\([0-9]*\).*/\1/'; }

# run NAME SEED SAMPLER: GRPO on +/- from the student until BUDGET rollouts are generated.
run() {
  local name=$1 seed=$2 sampler=$3 run=$OUT/$1-s$2 steps=5 t0 load
  [ -f "$ROWS/$name-s$seed.json" ] && return
  rm -rf "$run"
  local args=(experiments/configs/grpo_addsub.toml --set output_dir="$run" --set seed="$seed" --set model.path="$STUDENT"
    --set "orchestrator.sampler=$sampler" --set ckpt.interval=5 --set ckpt.keep=1 --set orchestrator.eval.interval=20
    "${POOL_ARGS[@]}")
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$(date +%s)
  $RLX train "${args[@]}" --set max_steps=$steps > "$run.log" 2>&1
  while [ "$(generated "$run")" -lt $BUDGET ]; do
    steps=$((steps + 5))
    $RLX train "${args[@]}" --set max_steps=$steps --resume >> "$run.log" 2>&1
  done
  local wall=$(($(date +%s) - t0))
  $BUN experiments/scripts/sampling_budget.ts "$run" 8 > "$ROWS/$name-s$seed.budget.json"
  evaluate "$(last_weights "$run")" "$ADD" "$run/eval-add.json"
  evaluate "$(last_weights "$run")" "$SUB" "$run/eval-sub.json"
  $BUN experiments/scripts/row.ts --out "$ROWS/$name-s$seed.json" --row S --seed "$seed" --algorithm "grpo, $name" \
    --experiment "GRPO on +/- from 8d's student with the $name sampler${POOL:+ on a pool of $POOL training tasks}, $BUDGET generated rollouts ($(cat "$ROWS/$name-s$seed.budget.json"))" \
    --steps "$steps" --wall "$wall" --load-start "$load" \
    --before add=runs/reproduce/$SET/sub-student/eval-add.json --before sub=runs/reproduce/$SET/sub-student/eval.json \
    --after add=$run/eval-add.json --after sub=$run/eval-sub.json \
    --command "rlx train experiments/configs/grpo_addsub.toml --set 'orchestrator.sampler=$sampler'${POOL:+ --set 'orchestrator.train.env[0].args.train_size=$POOL'} (until $BUDGET generated rollouts)"
}

echo "sampling $NAME: $(lscpu | sed -n 's/Model name: *//p'), $(nproc) cores, commit $(git rev-parse --short HEAD)"
declare -A SPEC=(
  [uniform]='{type = "uniform"}'
  [filter]='{type = "filter"}'
  [curriculum]='{type = "curriculum", target = 0.5}'
  [replay]='{type = "replay", share = 0.25, max_age = 2}'
)
for name in $SAMPLERS; do [ -n "${SPEC[$name]:-}" ] || { echo "unknown sampler $name (uniform filter curriculum replay)" >&2; exit 2; }; done
for seed in $SEEDS; do
  for name in $SAMPLERS; do run "$name" "$seed" "${SPEC[$name]}"; done
done
echo "rows in $ROWS"
