#!/usr/bin/env bash
# Experiment 6 on a student that can read the hint. The first OPSD run (student_algos.sh opsd)
# made the student worse because its teacher, the student behind a system message it had never
# seen, was a worse model. Here the addition student first learns to read OPSD's hint
# (experiments/configs/sft_add_hints.toml: its demonstrations plain and hinted), then OPSD and, as
# the baseline, GRPO run from that student with experiment 2's recipe (grpo_add.sh, 40 steps).
# The hinted model's answer loss on held-out hinted demonstrations (obs_loss.ts --role assistant)
# says how good a teacher the hint makes, before and after learning to read it.
#
#   bash experiments/scripts/opsd_hints.sh [SEED]
set -euo pipefail
cd "$(dirname "$0")/../.."
RLX=${RLX:-dist/rlx}
BUN=${BUN:-node_modules/.bin/bun}
OUT=runs/learns
SEED=${1:-0}
ARGS='{"operations": ["+"], "word_problems": false}'

[ -s $OUT/add-hinted.jsonl ] || $BUN experiments/scripts/hint_demos.ts $OUT/add.jsonl $OUT/add-hinted.jsonl
[ -s $OUT/add-eval.jsonl ] || $RLX env demos math --n 200 --split eval --args "$ARGS" --out $OUT/add-eval.jsonl
[ -s $OUT/add-eval-hinted.jsonl ] || $BUN experiments/scripts/hint_demos.ts $OUT/add-eval.jsonl $OUT/add-eval-hinted.jsonl --hinted-only
[ -f $OUT/sft-add-hints/model/config.json ] || /usr/bin/time -f "wall %e s" $RLX sft experiments/configs/sft_add_hints.toml 2>&1 | tee $OUT/sft-add-hints.log
rm -rf $OUT/student-hints && cp -r $OUT/sft-add-hints/model $OUT/student-hints
for model in student student-hints; do
  for file in add-eval add-eval-hinted; do $BUN experiments/scripts/obs_loss.ts $OUT/$model $OUT/$file.jsonl --role assistant; done
done | tee $OUT/opsd-hints-teacher.txt

NAME=opsd-hints-s$SEED ALGO=opsd bash experiments/scripts/grpo_add.sh $SEED --set model.path=$OUT/student-hints --set orchestrator.algo.demo_key=solution
NAME=grpo-hints-s$SEED bash experiments/scripts/grpo_add.sh $SEED --set model.path=$OUT/student-hints
