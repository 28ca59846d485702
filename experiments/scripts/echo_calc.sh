#!/usr/bin/env bash
# docs/results.md §7: GRPO against GRPO + ECHO on an env where predicting the tool's output is the
# skill the reward needs (src/envs/calc: add three numbers, a calculator adds two of them once).
# First the calc student: tiny from scratch with TEMPLATE as its chat template, SFT by stop band on
# DEMOS (default 6,000) tasks' demonstrations in both forms, with the calculator and without
# (experiments/configs/sft_calc_student.toml). TEMPLATE is configs/templates/bare_tool.jinja by
# default: the bare template with a mark before the calculator's turn, which the model never writes.
# Set epyc-1 ran with TEMPLATE=configs/templates/bare.jinja, where the calculator's `=65` follows
# the model's own end token with nothing between, and ECHO taught the policy to write it itself
# (docs/results.md §7). FROM=SET2 starts the student from set SET2's student instead of the tiny
# init, its chat template swapped for TEMPLATE. Set epyc-4 starts from epyc-3's bare-template
# student (tool greedy 0.305; 0.060 once the mark is in), because a student on the marked template
# from scratch was still below the band (0.07-0.12) at step 1,277.
# Then, at each of SEEDS (default 0 1 2), the arms of experiments/configs/echo_calc.toml with the
# same budget: GRPO, and ECHO at each of ALPHAS (the tool role's cross-entropy weight, default 0.1,
# 1 and 0.01). Every model (the student, each run's last weights) is scored on all 200 held-out tasks
# with the calculator and without it by `rlx eval` (greedy pass@1, and pass@1 / pass@8 from 8
# samples at T = 1), and by the held-out nll of the calculator's outputs (obs_loss.ts on 200
# held-out demonstrations). Each result is one JSON row under experiments/results/echo_calc/SET/
# (row.ts); a row that exists is not run again, so a stopped command continues where it stopped.
# echo_calc_table.ts then regenerates the page's table from the rows.
#
#   bash experiments/scripts/echo_calc.sh SET                 e.g. SET=epyc-1 (a name for this run of it)
#   SEEDS="0 1 2" ALPHAS="0.1 1 0.01" PORT=8291 TEMPLATE=configs/templates/bare.jinja DEMOS=6000 bash experiments/scripts/echo_calc.sh SET
#   SEEDS= bash experiments/scripts/echo_calc.sh SET          the calc student alone (judge_calc.sh's arms start from it)
#   FROM=epyc-3 ALPHAS="0.1 0.01" bash experiments/scripts/echo_calc.sh epyc-4
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/scripts/run_tools.sh
RLX=${RLX:-dist/rlx}
BUN=node_modules/.bin/bun
SET=${1:?usage: echo_calc.sh SET   (a name for this run of the command, e.g. epyc-1)}
SEEDS=${SEEDS-0 1 2} # empty: the calc student alone
ALPHAS=${ALPHAS:-0.1 1 0.01}
PORT=${PORT:-8291}
TEMPLATE=${TEMPLATE:-configs/templates/bare_tool.jinja}
DEMOS=${DEMOS:-6000} # distinct training tasks, each demonstrated in both forms
FROM=${FROM:-}       # another set whose student this one's starts from
OUT=runs/echo-calc/$SET
ROWS=experiments/results/echo_calc/$SET
mkdir -p $OUT $ROWS

# score MODEL DIR: DIR/tool.json, DIR/notool.json (eval-200) and DIR/obs.json (tool-output nll).
score() {
  mkdir -p "$2"
  [ -s "$2/tool.json" ] || $RLX eval --model "$1" --env calc --args '{}' --n 200 --k 8 --max-tokens 16 --seed 0 --out "$2/tool.json" > /dev/null
  [ -s "$2/notool.json" ] || $RLX eval --model "$1" --env calc --args '{"tool": false}' --n 200 --k 8 --max-tokens 16 --seed 0 --out "$2/notool.json" > /dev/null
  [ -s "$2/obs.json" ] || $BUN experiments/scripts/obs_loss.ts "$1" $OUT/eval-demos.jsonl --json > "$2/obs.json"
}
row() { local file=$1; shift; $BUN experiments/scripts/row.ts --out "$ROWS/$file.json" --wall "$WALL" --load-start "$LOAD" --commit "$COMMIT" "$@"; }

START="tiny from scratch"
if [ -n "$FROM" ]; then
  from=runs/echo-calc/$FROM/student/model
  [ -f $from/config.json ] || { echo "echo_calc.sh: FROM=$FROM: no student at $from (build it: SEEDS= bash experiments/scripts/echo_calc.sh $FROM, with that set's TEMPLATE)" >&2; exit 2; }
  START="set $FROM's student ($(sed -n 's/.*chat template \([^,]*\),.*/\1/p' experiments/results/echo_calc/$FROM/student.json))"
  if [ ! -f $OUT/tiny/config.json ]; then
    rm -rf $OUT/tiny && cp -r $from $OUT/tiny && cp $TEMPLATE $OUT/tiny/chat_template.jinja
  fi
elif [ ! -f $OUT/tiny/config.json ]; then
  $RLX init --preset tiny --seed 0 --out $OUT/tiny --chat-template $TEMPLATE > /dev/null
fi
if [ ! -s $OUT/demos.jsonl ]; then
  $RLX env demos calc --n $DEMOS --seed 0 --args "{\"train_size\": $DEMOS}" --out $OUT/demos-tool.jsonl > /dev/null
  $RLX env demos calc --n $DEMOS --seed 0 --args "{\"tool\": false, \"train_size\": $DEMOS}" --out $OUT/demos-notool.jsonl > /dev/null
  paste -d'\n' $OUT/demos-tool.jsonl $OUT/demos-notool.jsonl > $OUT/demos.jsonl
fi
[ -s $OUT/eval-demos.jsonl ] || $RLX env demos calc --n 200 --seed 0 --split eval --out $OUT/eval-demos.jsonl > /dev/null

STUDENT=$OUT/student/model
if [ ! -f $ROWS/student.json ] || [ ! -f $STUDENT/config.json ]; then
  rm -rf $OUT/student
  timed $OUT/student.log $RLX sft experiments/configs/sft_calc_student.toml --set output_dir=$OUT/student \
    --set model.path=$OUT/tiny --set data.path=$OUT/demos.jsonl
  score $STUDENT $OUT/student/eval
  [ -f $ROWS/student.json ] || row student --row E-s --seed 0 --algorithm sft \
    --experiment "calc student: $START, chat template $(basename $TEMPLATE), SFT on the demos of $DEMOS tasks with the calculator and without" \
    --after tool=$OUT/student/eval/tool.json --after notool=$OUT/student/eval/notool.json \
    --obs-after $OUT/student/eval/obs.json --band $OUT/student/band.json \
    --command "rlx sft experiments/configs/sft_calc_student.toml"
fi
score $STUDENT $OUT/student/eval

for seed in $SEEDS; do
  for arm in grpo $(for a in $ALPHAS; do echo "echo$a"; done); do
    name=$arm-s$seed
    [ -f $ROWS/$name.json ] && continue
    run=$OUT/$name
    rm -rf $run
    algo=(--set "orchestrator.train.env[0].algo.type=${arm%%[0-9.]*}")
    delta=()
    if [ "$arm" != grpo ]; then
      algo+=(--set "orchestrator.train.env[0].algo.roles.tool.alpha=${arm#echo}")
      delta=(--delta "orchestrator.train.env[0].algo.roles.tool.alpha=${arm#echo}")
    fi
    timed $run.log $RLX train experiments/configs/echo_calc.toml --set output_dir=$run --set seed=$seed \
      --set model.path=$STUDENT --set inference.port=$PORT "${algo[@]}"
    score "$(last_weights $run)" $run/eval
    row $name --row "E-$arm" --seed $seed --algorithm "${arm%%[0-9.]*}" --steps 60 "${delta[@]}" \
      --experiment "calc, 60 steps from the calc student: ${arm/echo/ECHO, tool alpha }" \
      --before tool=$OUT/student/eval/tool.json --before notool=$OUT/student/eval/notool.json \
      --after tool=$run/eval/tool.json --after notool=$run/eval/notool.json \
      --obs-before $OUT/student/eval/obs.json --obs-after $run/eval/obs.json \
      --run $run --curves reward,loss/rl,loss/ce,entropy,metric/calc/called,optim/grad_norm,eval/tool/pass@1,eval/notool/pass@1 \
      --command "rlx train experiments/configs/echo_calc.toml ${algo[*]}"
  done
done
$BUN experiments/scripts/echo_calc_table.ts
