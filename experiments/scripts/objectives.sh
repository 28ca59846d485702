#!/usr/bin/env bash
# The objectives side by side (docs/algorithms.md, "Which objective"): from row L's lean student
# (reproduce.sh's band-stopped bare student; `PARTS=L reproduce.sh SET` is run first, which trains it
# unless it exists and writes the set's L rows), 40 steps of experiments/configs/grpo_bare.toml per
# objective and seed: GRPO with each rl loss type, or an advantage estimator with the default loss
# (experiments/scripts/objectives.ts: each one's `--set` values). Each run is scored like part L
# (`rlx eval` on the 200 held-out bare tasks, 8 tokens: greedy pass@1, pass@1 and pass@8 from 8
# samples at T = 1) and row.ts writes one JSON per objective and seed under
# experiments/results/objectives/SET/ with the run's per-step entropy, clipped and masked fractions,
# its rl loss and its config delta. A row whose file exists is not run again, so a stopped command
# continues where it stopped. Runs go to runs/objectives/SET/ (ignored). At the end
# objectives_table.ts regenerates the table in docs/algorithms.md.
#
#   bash experiments/scripts/objectives.sh SET
#   OBJECTIVES="gspo cispo" bash experiments/scripts/objectives.sh SET   some objectives (default all of objectives.ts)
#   SEEDS="0 1 2" PORT=8351 bash experiments/scripts/objectives.sh SET   PORT (default 8341) is each run's policy
#                                                                         server, PORT+2 part L's (reproduce.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/scripts/run_tools.sh
RLX=${RLX:-dist/rlx}
BUN=node_modules/.bin/bun
SET=${1:?usage: objectives.sh SET   (the SET reproduce.sh builds or built the lean student in)}
SEEDS=${SEEDS:-0 1}
PORT=${PORT:-8341}
OBJECTIVES=${OBJECTIVES:-$($BUN experiments/scripts/objectives.ts)}
STUDENT=runs/reproduce/$SET/bare-student
OUT=runs/objectives/$SET
ROWS=experiments/results/objectives/$SET
BARE='{"operations": ["+"], "format": "bare"}'
started=$(date +%s)

echo "objectives $SET: $(lscpu | sed -n 's/Model name: *//p'), $(nproc) cores, commit $(git rev-parse --short HEAD); $OBJECTIVES"
PARTS=L SEEDS="$SEEDS" PORT=$PORT RLX="$RLX" bash experiments/scripts/reproduce.sh "$SET"
mkdir -p $OUT $ROWS

for objective in $OBJECTIVES; do
  mapfile -t def < <($BUN experiments/scripts/objectives.ts "$objective") # its algorithm, then its --set values
  [ ${#def[@]} -gt 0 ] || exit 2
  algo=${def[0]}
  sets=() deltas=()
  for value in "${def[@]:1}"; do sets+=(--set "$value") deltas+=(--delta "$value"); done
  for seed in $SEEDS; do
    name=$objective-s$seed
    [ -f "$ROWS/$name.json" ] && continue
    echo "== $name"
    run=$OUT/$name
    rm -rf "$run"
    timed "$run.log" $RLX train experiments/configs/grpo_bare.toml --set output_dir="$run" --set seed="$seed" \
      --set model.path=$STUDENT/model --set inference.port=$PORT "${sets[@]}"
    [ -s "$run/eval.json" ] || $RLX eval --model "$(last_weights "$run")" --env math --args "$BARE" --n 200 --k 8 \
      --max-tokens 8 --seed 0 --out "$run/eval.json" > /dev/null
    $BUN experiments/scripts/row.ts --out "$ROWS/$name.json" --row "$objective" --seed "$seed" --algorithm "$algo" \
      --experiment "objective $objective: 40 steps of grpo_bare.toml from the lean student" --steps 40 \
      --before math=$STUDENT/eval.json --after math="$run/eval.json" --run "$run" "${deltas[@]}" \
      --wall "$WALL" --load-start "$LOAD" --commit "$COMMIT" \
      --command "rlx train experiments/configs/grpo_bare.toml${sets[*]:+ ${sets[*]}}"
  done
done

$BUN experiments/scripts/objectives_table.ts
echo "objectives $SET: done in $((($(date +%s) - started) / 60)) min; rows in $ROWS, table in docs/algorithms.md"
