#!/usr/bin/env bash
# Experiment 3, the harder variant: mixed 2-digit addition and subtraction from the addition
# student (run bootstrap.sh first). GRPO and MaxRL with experiment 2's recipe
# (experiments/configs/grpo_addsub.toml, 40 steps), then continuing SFT on gold demonstrations
# (experiments/configs/sft_addsub_continue.toml, checkpoints every 100 steps), each scored by
# `rlx eval` on 200 held-out tasks: the RL runs' final weights and every SFT checkpoint, so the
# SFT checkpoint at the RL runs' wall time can be read off. Then SFT followed by RL: GRPO (same
# recipe) from the SFT run's final model, against the SFT run continued for about the same time
# (640 more steps, `--resume` on a copy). `experiments/scripts/eval_by.ts` splits every result
# into its addition and subtraction halves.
#
#   bash experiments/scripts/addsub.sh [SEED]
set -euo pipefail
cd "$(dirname "$0")/../.."
RLX=${RLX:-dist/rlx}
OUT=runs/learns
ARGS='{"operations": ["+", "-"], "word_problems": false}'
SEED=${1:-0}
evaluate() { $RLX eval --model "$1" --env math --args "$ARGS" --n 200 --k 8 --max-tokens 48 --seed 0 --out "$2"; }

[ -s $OUT/addsub.jsonl ] || $RLX env demos math --n 6000 --args "$ARGS" --out $OUT/addsub.jsonl
[ -f $OUT/eval-student-addsub.json ] || evaluate $OUT/student $OUT/eval-student-addsub.json
for ALGO in grpo max_rl; do
  RUN=$OUT/$ALGO-addsub-s$SEED
  [ -f $RUN/eval-final.json ] && continue
  rm -rf $RUN
  /usr/bin/time -f "wall %e s" $RLX train experiments/configs/grpo_addsub.toml --set output_dir=$RUN --set seed=$SEED \
    --set orchestrator.algo.type=$ALGO 2>&1 | tee $RUN.log
  evaluate "$(ls -d $RUN/weights/step_* | sort -t_ -k2 -n | tail -1)" $RUN/eval-final.json
  $RLX report $RUN
done
RUN=$OUT/sft-addsub-s$SEED
if [ ! -f $RUN/model/config.json ]; then
  rm -rf $RUN
  /usr/bin/time -f "wall %e s" $RLX sft experiments/configs/sft_addsub_continue.toml --set output_dir=$RUN --set seed=$SEED 2>&1 | tee $RUN.log
fi
for ckpt in $(ls -d $RUN/checkpoints/step_* | sort -t_ -k2 -n); do
  [ -f $ckpt/eval.json ] || evaluate $ckpt/trainer/model $ckpt/eval.json
done
$RLX report $RUN

SFT=$RUN
RUN=$OUT/grpo-addsub-after-sft-s$SEED
if [ ! -f $RUN/eval-final.json ]; then
  rm -rf $RUN
  /usr/bin/time -f "wall %e s" $RLX train experiments/configs/grpo_addsub.toml --set output_dir=$RUN --set seed=$SEED \
    --set model.path=$SFT/model 2>&1 | tee $RUN.log
  evaluate "$(ls -d $RUN/weights/step_* | sort -t_ -k2 -n | tail -1)" $RUN/eval-final.json
  $RLX report $RUN
fi
RUN=$OUT/sft-addsub-long-s$SEED
if [ ! -f $RUN/eval-final.json ]; then
  rm -rf $RUN && cp -r $SFT $RUN
  /usr/bin/time -f "wall %e s" $RLX sft experiments/configs/sft_addsub_continue.toml --set output_dir=$RUN --set seed=$SEED \
    --set trainer.steps=1440 --resume 2>&1 | tee $RUN.log
  evaluate $RUN/model $RUN/eval-final.json
fi
