#!/usr/bin/env bash
# Experiment 7: ECHO vs GRPO on forth. A forth student (tiny preset, seed 0, short SFT on gold
# demonstrations of the factorial and power kinds: experiments/configs/sft_forth_student.toml, then
# experiments/configs/sft_forth_student_more.toml), then two RL runs from it with the same seed and
# steps (experiments/configs/echo_forth.toml), one GRPO and one ECHO (alpha 0.1 on tool outputs), run
# side by side so both see the same machine load. Reward on the held-out tasks comes from each run's own
# evals; the held-out observation-prediction loss (mean -log p of tool-output content tokens of
# held-out gold demonstrations, experiments/scripts/obs_loss.ts) is scored on the student and on
# each run's checkpoints. Steps already done (model, demos, SFT) are skipped on a second run.
#
#   TEMP=0.5 bash experiments/scripts/echo_forth.sh [SEED]
#
# TEMP is the rollout temperature (default 1): the student this budget affords gets the program
# right greedily but rarely at T = 1, and a group whose 8 rewards are all 0 trains nothing.
#
# With a student already made (STUDENT, its held-out demonstrations in DATA), the first part is
# skipped and CONFIG's runs go to NAME (docs/results.md §7, the wide student):
#   CONFIG=experiments/configs/echo_forth_wide.toml STUDENT=runs/learns/forth-sft-wide/model \
#     DATA=runs/learns/forth-wide NAME=echo-forth-wide bash experiments/scripts/echo_forth.sh 0
set -euo pipefail
cd "$(dirname "$0")/../.."
RLX=${RLX:-dist/rlx}
BUN=${BUN:-node_modules/.bin/bun}
OUT=runs/learns
SEED=${1:-0}
TEMP=${TEMP:-1.0}
KINDS='"kinds":["factorial","power"],"train_size":64,"eval_size":16'
CONFIG=${CONFIG:-experiments/configs/echo_forth.toml}
NAME=${NAME:-echo-forth}
DATA=${DATA:-$OUT/forth-data}

if [ -z "${STUDENT:-}" ]; then
  [ -f $OUT/forth-tiny/config.json ] || $RLX init --preset tiny --seed 0 --out $OUT/forth-tiny
  mkdir -p $DATA
  [ -s $DATA/train.jsonl ] || $RLX env demos forth --n 64 --args "{$KINDS}" --out $DATA/train.jsonl
  [ -s $DATA/eval.jsonl ] || $RLX env demos forth --n 16 --split eval --args "{$KINDS}" --out $DATA/eval.jsonl
  [ -f $OUT/forth-sft/model/config.json ] || /usr/bin/time -f "wall %e s" $RLX sft experiments/configs/sft_forth_student.toml 2>&1 | tee $OUT/forth-sft.log
  [ -f $OUT/forth-sft2/model/config.json ] || /usr/bin/time -f "wall %e s" $RLX sft experiments/configs/sft_forth_student_more.toml 2>&1 | tee $OUT/forth-sft2.log
  STUDENT=$OUT/forth-sft2/model
fi

PORT=8271
for ALGO in grpo echo; do
  RUN=$OUT/$NAME-$ALGO-s$SEED
  rm -rf $RUN
  /usr/bin/time -f "wall %e s" $RLX train $CONFIG --set output_dir=$RUN --set seed=$SEED --set model.path=$STUDENT \
    --set "orchestrator.train.env[0].algo.type=$ALGO" --set orchestrator.temperature=$TEMP --set inference.port=$PORT > $RUN.log 2>&1 &
  PORT=$((PORT + 1))
done
wait

# Observation loss of the student, then of each run's checkpoints (HF model dirs; a GRPO run whose
# groups all had equal rewards aborts before its first checkpoint, and its model is the student).
{
  $BUN experiments/scripts/obs_loss.ts $STUDENT $DATA/eval.jsonl --json | sed 's/^/{"run":"student","step":0,"row":/; s/$/}/'
  for ALGO in grpo echo; do
    RUN=$OUT/$NAME-$ALGO-s$SEED
    for ckpt in $(ls -d $RUN/checkpoints/step_* 2>/dev/null | sort -t_ -k2 -n); do
      $BUN experiments/scripts/obs_loss.ts $ckpt/trainer/model $DATA/eval.jsonl --json | sed "s/^/{\"run\":\"$ALGO\",\"step\":${ckpt##*_},\"row\":/; s/\$/}/"
    done
  done
} | tee $OUT/$NAME-s$SEED-obs.jsonl
for ALGO in grpo echo; do $RLX report $OUT/$NAME-$ALGO-s$SEED || true; done   # a run that aborted before step 1 has no curves
