#!/usr/bin/env bash
# The calibration's bar on the lean format (docs/results.md, "Learning per minute"): GRPO on 2-digit
# addition as `48+22=` -> `70` from row L's lean student (reproduce.sh's band-stopped bare
# student), row L's recipe (experiments/configs/grpo_bare.toml: 32 prompts x 8, lr 1e-4) run for STEPS
# steps (default 200) instead of 40, at SEEDS (default 0 1). Each run is scored by `rlx eval` on
# 200 held-out tasks (greedy pass@1; pass@1 and pass@8 from 8 samples at T = 1) and row.ts writes
# one JSON per seed under experiments/results/lean/SET/ with its wall time (the run alone: the eval after
# it is not counted). Runs go to runs/lean/SET/ (ignored); a seed whose row exists is not run again.
#
#   PARTS=L bash experiments/scripts/reproduce.sh SET     first (it builds runs/reproduce/SET/bare-student)
#   bash experiments/scripts/lean_minutes.sh SET
set -euo pipefail
cd "$(dirname "$0")/../.."
RLX=${RLX:-dist/rlx}
SET=${1:?usage: lean_minutes.sh SET   (the SET reproduce.sh built the students in)}
SEEDS=${SEEDS:-0 1}
STEPS=${STEPS:-200}
STUDENT=runs/reproduce/$SET/bare-student
OUT=runs/lean/$SET
ROWS=experiments/results/lean/$SET
ADD='{"operations": ["+"], "format": "bare"}'
[ -f $STUDENT/model/config.json ] || { echo "no $STUDENT/model: run PARTS=L experiments/scripts/reproduce.sh $SET first" >&2; exit 2; }
mkdir -p $OUT $ROWS

evaluate() { [ -s "$2" ] || $RLX eval --model "$1" --env math --args "$ADD" --n 200 --k 8 --max-tokens 8 --seed 0 --out "$2" > /dev/null; }

echo "lean_minutes $SET: $(lscpu | sed -n 's/Model name: *//p'), $(nproc) cores, commit $(git rev-parse --short HEAD)"
evaluate $STUDENT/model $OUT/student-eval.json
for seed in $SEEDS; do
  run=$OUT/grpo-s$seed
  [ -f "$ROWS/grpo-s$seed.json" ] && continue
  rm -rf "$run"
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$(date +%s)
  $RLX train experiments/configs/grpo_bare.toml --set output_dir="$run" --set seed="$seed" --set model.path=$STUDENT/model \
    --set max_steps="$STEPS" --set orchestrator.eval.interval=50 > "$run.log" 2>&1
  wall=$(($(date +%s) - t0))
  last=$(ls -d "$run"/weights/step_* | sort -t_ -k2 -n | tail -1)
  evaluate "$last" "$run/eval.json"
  node_modules/.bin/bun experiments/scripts/row.ts --out "$ROWS/grpo-s$seed.json" --row L200 --seed "$seed" --algorithm grpo \
    --experiment "GRPO on the lean format from row L's student, $STEPS steps" --steps "$STEPS" --wall "$wall" --load-start "$load" \
    --before add=$OUT/student-eval.json --after add=$run/eval.json \
    --command "rlx train experiments/configs/grpo_bare.toml --set max_steps=$STEPS --set model.path=$STUDENT/model --set seed=$seed"
done
echo "rows in $ROWS"
