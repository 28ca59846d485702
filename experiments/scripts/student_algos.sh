#!/usr/bin/env bash
# Experiments 3-6 on 2-digit addition, from the bootstrap student (run bootstrap.sh first), each
# with grpo_add.sh's recipe and budget (40 steps of 32 prompts x 8, lr 1e-4, same evals):
#
#   3  MaxRL vs GRPO at seeds 0, 1, 2 (seed 0 of both is skipped when its run already exists)
#   4  OPD: the bootstrap teacher served by `rlx serve`, prefilling the student's samples
#   5  SFT (distillation): rollouts sampled by the served teacher, cross-entropy on them
#   6  OPSD: the live policy, prompted with the task's worked solution, as its own teacher
#
#   bash experiments/scripts/student_algos.sh [opd sft opsd seeds]   (default: all four)
set -euo pipefail
cd "$(dirname "$0")/../.."
RLX=${RLX:-dist/rlx}
OUT=runs/learns
PORT=8301
TEACHER="http://127.0.0.1:$PORT/v1"
WHAT=${*:-"opd sft opsd seeds"}

serve_teacher() {
  RLX_THREADS=1 $RLX serve --model $OUT/teacher --served-model-name teacher --port $PORT --max-batch 256 > $OUT/teacher-serve.log 2>&1 &
  trap "kill $! 2>/dev/null" EXIT
  until curl -sf http://127.0.0.1:$PORT/health > /dev/null; do sleep 0.5; done
}

for what in $WHAT; do
  case $what in
    opd)
      [ -n "$(jobs -p)" ] || serve_teacher
      ALGO=opd bash experiments/scripts/grpo_add.sh 0 --set orchestrator.algo.teacher.name=teacher --set orchestrator.algo.teacher.base_url=$TEACHER ;;
    sft)
      [ -n "$(jobs -p)" ] || serve_teacher
      ALGO=sft bash experiments/scripts/grpo_add.sh 0 --set orchestrator.algo.sampling.source.name=teacher --set orchestrator.algo.sampling.source.base_url=$TEACHER ;;
    opsd)
      ALGO=opsd bash experiments/scripts/grpo_add.sh 0 --set orchestrator.algo.demo_key=solution ;;  # the envs keep worked solutions under `solution`
    seeds)
      for seed in 0 1 2; do
        for algo in grpo max_rl; do
          [ -f $OUT/$algo-add-s$seed/eval-final.json ] || ALGO=$algo bash experiments/scripts/grpo_add.sh $seed
        done
      done ;;
    *) echo "unknown experiment $what (opd, sft, opsd, seeds)" >&2; exit 2 ;;
  esac
done
