#!/usr/bin/env bash
# Experiment 8, second half: one student distilled from two teachers, one per env
# (experiments/configs/opd_two_teachers.toml). Needs bootstrap.sh (the student and the addition
# teacher) and addsub.sh (whose SFT-then-GRPO run's final weights are the subtraction teacher).
# Each teacher is its own `rlx serve` (one thread each); the run's held-out greedy evals per env
# come every 5 steps, and `rlx eval` scores the final weights on 200 held-out tasks of each env.
#
#   bash experiments/scripts/two_teachers.sh [SEED]
#   STUDENT=runs/learns/sft-addsub-s0/checkpoints/step_400/trainer/model NAME=opd-two-teachers-mixed \
#     bash experiments/scripts/two_teachers.sh     (a student that already samples `-` sometimes)
#   ... NAME=mixed-grpo-opd bash experiments/scripts/two_teachers.sh 0 --set 'orchestrator.train.env[0].algo={type = "grpo"}'
#     (extra arguments go to rlx train: here `add` on GRPO and `sub` on OPD in one run; so does
#     $RLX_SET, as in grpo_add.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
RLX=${RLX:-dist/rlx}
OUT=runs/learns
SEED=${1:-0}
shift || true
STUDENT=${STUDENT:-$OUT/student}
RUN=$OUT/${NAME:-opd-two-teachers}-s$SEED

rm -rf $OUT/sub-teacher && cp -r "$(ls -d $OUT/grpo-addsub-after-sft-s0/weights/step_* | sort -t_ -k2 -n | tail -1)" $OUT/sub-teacher
RLX_THREADS=1 $RLX serve --model $OUT/teacher --served-model-name add-teacher --port 8311 --max-batch 256 > $OUT/add-teacher.log 2>&1 &
RLX_THREADS=1 $RLX serve --model $OUT/sub-teacher --served-model-name sub-teacher --port 8312 --max-batch 256 > $OUT/sub-teacher.log 2>&1 &
trap 'kill $(jobs -p) 2>/dev/null' EXIT
for port in 8311 8312; do until curl -sf http://127.0.0.1:$port/health > /dev/null; do sleep 0.5; done; done

rm -rf $RUN
/usr/bin/time -f "wall %e s" $RLX train experiments/configs/opd_two_teachers.toml --set output_dir=$RUN --set seed=$SEED \
  --set model.path=$STUDENT "$@" ${RLX_SET:-} 2>&1 | tee $RUN.log
last=$(ls -d $RUN/weights/step_* | sort -t_ -k2 -n | tail -1)
for op in + -; do
  name=$([ "$op" = + ] && echo add || echo sub)
  for model in $STUDENT $OUT/teacher $OUT/sub-teacher "$last"; do
    tag=$(basename "$model"); [ "$model" = "$STUDENT" ] && tag=student
    [ -f $RUN/eval-$name-$tag.json ] || $RLX eval --model "$model" --env math --args "{\"operations\": [\"$op\"], \"word_problems\": false}" \
      --n 200 --k 8 --max-tokens 48 --seed 0 --out $RUN/eval-$name-$tag.json
  done
done
$RLX report $RUN
