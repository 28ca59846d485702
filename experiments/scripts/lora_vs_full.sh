#!/usr/bin/env bash
# LoRA against full fine-tuning at equal steps (docs/lora.md, docs/results.md §10): GRPO on the
# lean addition task (experiments/configs/grpo_bare.toml, 40 steps of 32 prompts x 8) from
# reproduce.sh's lean student, at SEEDS (default 0 1), once with every weight trained at the
# config's lr 1e-4 and once with `[model.lora]` r = 16, alpha = 32 on all seven projections at lr
# 1e-3 (adapters take ~10x the full-weight rate). The two runs of a seed go one after the other,
# so their step times are taken under the same load. Each run's own eval (100 held-out tasks,
# greedy and T = 1, every 10 steps) is the curve; `rlx eval` on 200 (greedy; pass@1 and pass@8 from
# 8 samples) scores the last step; bench/step_times.ts stores the median step, train, reload and publish
# times and the published step's size beside each row. Rows in experiments/results/lora/SET/, runs in
# runs/lora/SET/ (ignored); a run whose row exists is not run again. The rows of §10 started from
# the lean student of the band's first version (0.715); the student reproduce.sh builds now is
# the 0.40-0.60 band's.
#
#   bash experiments/scripts/reproduce.sh SET     first (it builds runs/reproduce/SET/bare-student)
#   bash experiments/scripts/lora_vs_full.sh SET
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/scripts/run_tools.sh
RLX=${RLX:-dist/rlx}
BUN=node_modules/.bin/bun
SET=${1:?usage: lora_vs_full.sh SET   (the SET reproduce.sh built the lean student in)}
SEEDS=${SEEDS:-0 1}
PORT=${PORT:-8250}
STUDENT=runs/reproduce/$SET/bare-student
OUT=runs/lora/$SET
ROWS=experiments/results/lora/$SET
BARE='{"operations": ["+"], "format": "bare"}'
[ -f $STUDENT/model/config.json ] || { echo "no $STUDENT: run experiments/scripts/reproduce.sh $SET first" >&2; exit 2; }
mkdir -p $OUT $ROWS

evaluate() { [ -s "$3" ] || $RLX eval --model "$1" --env math --args "$2" --n 200 --k 8 --max-tokens 8 --seed 0 --out "$3" > /dev/null; }

# run NAME SEED [--set ...]: GRPO on the lean task from the lean student, 40 steps.
run() {
  local name=$1 seed=$2 run=$OUT/$1-s$2 t0 load
  shift 2
  [ -f "$ROWS/$name-s$seed.json" ] && return
  rm -rf "$run"
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$(date +%s)
  $RLX train experiments/configs/grpo_bare.toml --set output_dir="$run" --set seed="$seed" \
    --set model.path=$STUDENT/model --set inference.port="$PORT" --set orchestrator.eval.interval=10 "$@" > "$run.log" 2>&1
  local wall=$(($(date +%s) - t0))
  evaluate "$(last_weights "$run")" "$BARE" "$run/eval.json"
  $BUN bench/step_times.ts "$run" > "$ROWS/$name-s$seed.times.json"
  $BUN experiments/scripts/row.ts --out "$ROWS/$name-s$seed.json" --row LoRA --seed "$seed" --algorithm "grpo, $name" \
    --experiment "GRPO on the lean format from the lean student, 40 steps, $name ($(cat "$ROWS/$name-s$seed.times.json"))" \
    --steps 40 --wall "$wall" --load-start "$load" \
    --before math=$STUDENT/eval.json --after math=$run/eval.json \
    --command "rlx train experiments/configs/grpo_bare.toml $*"
}

echo "lora_vs_full $SET: $(lscpu | sed -n 's/Model name: *//p'), $(nproc) cores, commit $(git rev-parse --short HEAD)"
for seed in $SEEDS; do
  run full "$seed"
  run lora "$seed" --set model.lora.rank=16 --set model.lora.alpha=32 --set trainer.optim.lr=1e-3
done
echo "rows in $ROWS"
