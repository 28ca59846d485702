#!/usr/bin/env bash
# Experiment 2: GRPO on 2-digit addition from the bootstrap student (run bootstrap.sh first),
# the calibration recipe (experiments/configs/grpo_add.toml). The run's own held-out evals
# give greedy pass@1 every 5 steps; `rlx eval` on the final weights gives pass@1/pass@8 on all 200
# held-out tasks, and `rlx report` the reward and eval curves.
#
#   bash experiments/scripts/grpo_add.sh [SEED] [extra --set overrides for rlx train]
#   ALGO=max_rl bash experiments/scripts/grpo_add.sh 1     (experiment 3: same student, budget and seeds)
#   RLX_SET="--set trainer.loss.type=icepop" NAME=icepop-add-s0 bash experiments/scripts/grpo_add.sh 0
#     RLX_SET: extra overrides that the scripts calling this one (student_algos.sh, opsd_hints.sh)
#     pass through; NAME keeps the variant beside the main run
set -euo pipefail
cd "$(dirname "$0")/../.."
RLX=${RLX:-dist/rlx}
OUT=runs/learns
ARGS='{"operations": ["+"], "word_problems": false}'
ALGO=${ALGO:-grpo}
SEED=${1:-0}
shift || true
RUN=$OUT/${NAME:-$ALGO-add-s$SEED}     # NAME= keeps a variant (e.g. another lr) beside the main run

rm -rf $RUN
/usr/bin/time -f "wall %e s" $RLX train experiments/configs/grpo_add.toml --set output_dir=$RUN --set seed=$SEED --set orchestrator.algo.type=$ALGO "$@" ${RLX_SET:-} 2>&1 | tee $RUN.log
last=$(ls -d $RUN/weights/step_* | sort -t_ -k2 -n | tail -1)
$RLX eval --model "$last" --env math --args "$ARGS" --n 200 --k 8 --max-tokens 48 --seed 0 --out $RUN/eval-final.json
$RLX report $RUN
