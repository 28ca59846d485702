#!/usr/bin/env bash
# Experiment 1 (bootstrap): a tiny model from scratch -> SFT on gold 2-digit-addition
# demonstrations -> a student (the run stops at the first held-out eval, every 50 steps on all 200
# held-out tasks, whose greedy pass@1 is in 0.40-0.65: experiments/configs/sft_add_student.toml's
# [eval.stop]) and a teacher (the student trained further until greedy pass@1 >= 0.85:
# experiments/configs/sft_add_teacher.toml). The stop band makes them the same models on any machine:
# a fixed step count does not, since where SFT's accuracy jumps depends on the CPU (docs/results.md
# §1). Each stop is recorded in its run's band.json. Both are evaluated with `rlx eval` on all 200
# held-out tasks (greedy pass@1, pass@1 and pass@8 at temperature 1). Seeded: model init seed 0,
# demos seed 0, SFT seed 0. Steps already done are skipped. experiments/scripts/reproduce.sh does
# all of this too, and the rows built on it.
#
#   bash experiments/scripts/bootstrap.sh          (RLX=dist/rlx by default; RLX="bun src/main.ts" works too)
#   The weaker student of row 2e, as a band of the same run (it stops earlier):
#   rlx sft experiments/configs/sft_add_student.toml --set output_dir=runs/learns/sft-add-low \
#     --set eval.stop.min=0.25 --set eval.stop.max=0.40 && cp -r runs/learns/sft-add-low/model runs/learns/student-low
set -euo pipefail
cd "$(dirname "$0")/../.."
RLX=${RLX:-dist/rlx}
OUT=runs/learns
ARGS='{"operations": ["+"], "word_problems": false}'
mkdir -p $OUT

[ -f $OUT/tiny/config.json ] || $RLX init --preset tiny --seed 0 --out $OUT/tiny
[ -s $OUT/add.jsonl ] || $RLX env demos math --n 6000 --seed 0 \
  --args '{"operations": ["+"], "word_problems": false, "train_size": 6000}' --out $OUT/add.jsonl
[ -f $OUT/sft-add/band.json ] || $RLX sft experiments/configs/sft_add_student.toml --force "$@" | tee $OUT/sft-add.log
rm -rf $OUT/student && cp -r $OUT/sft-add/model $OUT/student
[ -f $OUT/sft-add-teacher/band.json ] || $RLX sft experiments/configs/sft_add_teacher.toml --force | tee $OUT/sft-add-teacher.log
rm -rf $OUT/teacher && cp -r $OUT/sft-add-teacher/model $OUT/teacher

for who in student teacher; do
  $RLX eval --model $OUT/$who --env math --args "$ARGS" --n 200 --k 8 --max-tokens 48 --seed 0 --out $OUT/eval-$who.json
done
