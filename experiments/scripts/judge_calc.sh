#!/usr/bin/env bash
# docs/results.md §14: a judge that can judge, made here since no capable model can be fetched. The
# calc judge (experiments/judges/calc_check.ts) reads a calc rollout as one line, adds the task's
# numbers with its calculator, and says yes or no. It is tiny from scratch with the marked bare
# template, SFT on 20,000 judge demonstrations written from the calc env's exact reward
# (judge_calc_demos.ts: right rollouts and the wrong ones a calc student writes, about half each),
# stopped by band when its greedy verdicts on 200 held-out questions (calc eval tasks, exactly half
# right) reach a balanced accuracy of 0.90 against the exact reward
# (experiments/configs/sft_calc_judge.toml; experiments/envs/calc_judging.ts scores it). Then it is
# scored on 400 other held-out questions (other rollouts of the eval tasks, exactly half right),
# where the target (>= 0.85) is read. Rows under experiments/results/judge_calc/SET/ (row.ts); a
# row that exists is not run again.
#
#   bash experiments/scripts/judge_calc.sh SET        e.g. SET=epyc-1 (a name for this run of it)
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/scripts/run_tools.sh
RLX=${RLX:-dist/rlx}
BUN=node_modules/.bin/bun
SET=${1:?usage: judge_calc.sh SET   (a name for this run of the command, e.g. epyc-1)}
OUT=runs/judge-calc/$SET
ROWS=experiments/results/judge_calc/$SET
mkdir -p $OUT $ROWS
judging() { echo "{\"train\": \"$OUT/judge-train.jsonl\", \"eval\": \"$1\"}"; }

[ -f $OUT/tiny/config.json ] ||
  $RLX init --preset tiny --seed 0 --out $OUT/tiny --chat-template configs/templates/bare_tool.jinja > /dev/null
[ -s $OUT/judge-train.jsonl ] || $BUN experiments/scripts/judge_calc_demos.ts $OUT/judge-train.jsonl --n 20000 --seed 0
[ -s $OUT/judge-eval.jsonl ] || $BUN experiments/scripts/judge_calc_demos.ts $OUT/judge-eval.jsonl --n 200 --split eval --seed 0 --balanced
[ -s $OUT/judge-test.jsonl ] || $BUN experiments/scripts/judge_calc_demos.ts $OUT/judge-test.jsonl --n 400 --split eval --seed 1 --balanced

JUDGE=$OUT/judge/model
if [ ! -f $ROWS/judge.json ] || [ ! -f $JUDGE/config.json ]; then
  rm -rf $OUT/judge
  timed $OUT/judge.log $RLX sft experiments/configs/sft_calc_judge.toml --set output_dir=$OUT/judge \
    --set model.path=$OUT/tiny --set data.path=$OUT/judge-train.jsonl \
    --set "eval.env[0].args={train = \"$OUT/judge-train.jsonl\", eval = \"$OUT/judge-eval.jsonl\"}"
  $RLX eval --model $JUDGE --env experiments/envs/calc_judging.ts --args "$(judging $OUT/judge-test.jsonl)" \
    --n 400 --k 1 --max-tokens 16 --seed 0 --out $OUT/judge/test.json > /dev/null
  [ -f $ROWS/judge.json ] || $BUN experiments/scripts/row.ts --out $ROWS/judge.json --wall "$WALL" --load-start "$LOAD" \
    --commit "$COMMIT" --row J-s --seed 0 --algorithm sft \
    --experiment "calc judge: tiny from scratch, chat template bare_tool.jinja, SFT on 20,000 judge demonstrations (about half right), scored on 400 held-out questions (half right)" \
    --after judging=$OUT/judge/test.json --band $OUT/judge/band.json --command "rlx sft experiments/configs/sft_calc_judge.toml"
fi
