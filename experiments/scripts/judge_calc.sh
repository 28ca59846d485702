#!/usr/bin/env bash
# docs/results.md §14: a judge that can judge, made here since no capable model can be fetched. The
# calc judge (experiments/judges/calc_check.ts) reads a calc rollout as one line, checks its final
# claim (and, when that is wrong, its calculator call) with a checker, and says `yes` or `no K`, K
# the turn that decided it. Its model is tiny from scratch with the marked bare template, SFT on
# 20,000 demonstrations written from the calc env's exact reward (judge_calc_demos.ts: right
# rollouts and the wrong ones a calc student writes, about half each), stopped by band when its
# greedy verdicts on 200 held-out questions (calc eval tasks, exactly half right) reach a balanced
# accuracy of 0.90 (experiments/configs/sft_calc_judge.toml; experiments/envs/calc_judging.ts
# scores it); then it is scored on 400 other held-out questions, where the target (>= 0.85) is read.
# Then, with the judge under `rlx serve` as a user serves theirs, three arms from the calc student of
# echo_calc.sh's set STUDENT_SET (default SET; `SEEDS= bash experiments/scripts/echo_calc.sh SET`
# makes it alone) at each of SEEDS (default 0 1), same budget (experiments/configs/judge_calc.toml):
# J1 GRPO on the exact reward, J2 GRPO on the judge's verdict, J3 GRPO with agentic credit from the
# judge (experiments/algorithms/calc_credit.ts). Each is scored on 200 held-out tasks with the exact
# reward; its row keeps the per-step curves of the judge's agreement with the exact reward within
# each class (judge/calc/agree_right, agree_wrong) and the step time. Rows under
# experiments/results/judge_calc/SET/ (row.ts); a row that exists is not run again.
#
#   bash experiments/scripts/judge_calc.sh SET                 e.g. SET=epyc-1 (a name for this run of it)
#   SEEDS="0 1" STUDENT_SET=epyc-3 PORT=8281 bash experiments/scripts/judge_calc.sh SET
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/scripts/run_tools.sh
RLX=${RLX:-dist/rlx}
BUN=node_modules/.bin/bun
SET=${1:?usage: judge_calc.sh SET   (a name for this run of the command, e.g. epyc-1)}
SEEDS=${SEEDS-0 1} # empty: the judge alone
PORT=${PORT:-8281} # each arm's policy server; PORT+1 the judge
STUDENT=runs/echo-calc/${STUDENT_SET:-$SET}/student
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

[ -z "$SEEDS" ] && exit 0
[ -f $STUDENT/model/config.json ] && [ -s $STUDENT/eval/tool.json ] || {
  echo "no calc student at $STUDENT: make one with SEEDS= bash experiments/scripts/echo_calc.sh ${STUDENT_SET:-$SET}" >&2
  exit 1
}
RLX_THREADS=1 $RLX serve --model $JUDGE --served-model-name judge --port $((PORT + 1)) --max-batch 256 > $OUT/judge-serve.log 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null' EXIT
until curl -sf "http://127.0.0.1:$((PORT + 1))/health" > /dev/null; do sleep 0.5; done
ENDPOINT="name = \"judge\", base_url = \"http://127.0.0.1:$((PORT + 1))/v1\""
for seed in $SEEDS; do
  for arm in exact judge credit; do
    name=$arm-s$seed
    [ -f $ROWS/$name.json ] && continue
    run=$OUT/$name
    rm -rf $run
    case $arm in
    exact) id=J1 algo=grpo what="GRPO on the exact reward" delta=() ;;
    judge) id=J2 algo=grpo what="GRPO on the calc judge's verdict" delta=(--set "orchestrator.train.env[0].judge={type = \"custom\", path = \"experiments/judges/calc_check.ts\", $ENDPOINT, max_tokens = 16, max_turns = 4}") ;;
    credit) id=J3 algo=calc_credit what="GRPO with agentic credit from the calc judge (mix 0.5)" delta=(--set "orchestrator.train.env[0].algo={type = \"custom\", path = \"experiments/algorithms/calc_credit.ts\", judge = {$ENDPOINT}}") ;;
    esac
    timed $run.log $RLX train experiments/configs/judge_calc.toml --set output_dir=$run --set seed=$seed \
      --set model.path=$STUDENT/model --set inference.port=$PORT "${delta[@]}"
    $RLX eval --model "$(last_weights $run)" --env calc --args '{}' --n 200 --k 8 --max-tokens 16 --seed 0 --out $run/eval.json > /dev/null
    $BUN experiments/scripts/row.ts --out $ROWS/$name.json --wall "$WALL" --load-start "$LOAD" --commit "$COMMIT" \
      --row $id --seed $seed --algorithm $algo --steps 40 --experiment "calc, 40 steps from the calc student: $what" \
      --before tool=$STUDENT/eval/tool.json --after tool=$run/eval.json --run $run \
      --curves reward,judge/calc/agree,judge/calc/agree_right,judge/calc/agree_wrong,judge/calc/exact_reward,credit/calc/weight,time/step,time/rollouts,eval/tool/pass@1 \
      --command "rlx train experiments/configs/judge_calc.toml ${delta[*]}"
  done
done
