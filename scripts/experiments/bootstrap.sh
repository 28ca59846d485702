#!/usr/bin/env bash
# Experiment 1 (bootstrap): a tiny model from scratch -> SFT on gold 2-digit-addition
# demonstrations -> a student (the checkpoint whose held-out greedy pass@1 is in 0.2-0.6, closest
# to 0.35) and a teacher (that run continued for 600 more steps: configs/examples/sft_add_teacher.toml). Both are evaluated
# with `rlx eval` on all 200 held-out tasks (greedy pass@1, pass@1 and pass@8 at temperature 1).
# Seeded: model init seed 0, demos seed 0, SFT seed 0. Steps already done are skipped.
#
#   bash scripts/experiments/bootstrap.sh          (RLX=dist/rlx by default; RLX="bun src/main.ts" works too)
set -euo pipefail
cd "$(dirname "$0")/../.."
RLX=${RLX:-dist/rlx}
BUN=node_modules/.bin/bun
OUT=runs/learns
ARGS='{"operations": ["+"], "word_problems": false}'
mkdir -p $OUT

[ -f $OUT/tiny/config.json ] || $RLX init --preset tiny --seed 0 --out $OUT/tiny
[ -s $OUT/add.jsonl ] || $RLX env demos math --n 6000 --seed 0 \
  --args '{"operations": ["+"], "word_problems": false, "train_size": 6000}' --out $OUT/add.jsonl
[ -f $OUT/sft-add/model/config.json ] || $RLX sft configs/examples/sft_add_student.toml "$@" | tee $OUT/sft-add.log

picked=$($BUN scripts/experiments/pick_checkpoint.ts $OUT/sft-add)
echo "student: $picked"
rm -rf $OUT/student && cp -r "$(cut -f1 <<<"$picked")" $OUT/student
[ -f $OUT/sft-add-teacher/model/config.json ] || $RLX sft configs/examples/sft_add_teacher.toml | tee $OUT/sft-add-teacher.log
rm -rf $OUT/teacher && cp -r $OUT/sft-add-teacher/model $OUT/teacher

for who in student teacher; do
  $RLX eval --model $OUT/$who --env math --args "$ARGS" --n 200 --k 8 --max-tokens 48 --seed 0 --out $OUT/eval-$who.json
done
