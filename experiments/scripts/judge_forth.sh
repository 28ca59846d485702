#!/usr/bin/env bash
# Judges on forth (docs/algorithms.md, "Judges"): three RL arms from one forth student, with the
# same seed, config and steps (experiments/configs/judge_forth.toml, multi-turn tool use):
#   J1  grpo            the env's exact reward (the final answer against the task's)
#   J2  grpo + judge    an agentic judge's verdict as the reward: JUDGE (an rlx model directory)
#                       served by `rlx serve`, with read_message, the env's forth tool and verdict
#   J3  agentic_credit  the exact reward; GRPO's advantage moved between turns by the same model
#                       as a credit judge (mix 0.5)
# After each run, `rlx eval` scores its last weights (the student's, when a run stopped before its
# first step: a GRPO batch whose rewards are all equal trains nothing) on all 16 held-out tasks with
# the exact reward: greedy pass@1, and pass@1 / pass@8 from 8 samples at temperature 1. Each arm is
# one JSON row (row.ts: scores before and after, seed, wall time, load, CPU, commit) under
# experiments/results/judge_forth/SET/, with the run's judge numbers added (judge_stats.ts: agreement with
# the exact reward, mean score, exact reward of the same rollouts, judge turns and tool calls,
# credit weights, failed share). A row whose JSON exists is not run again.
#
#   bash experiments/scripts/judge_forth.sh SET [SEED]        e.g. SET=epyc-1
#
# STUDENT (default: the forth student of docs/results.md §7, made here as echo_forth.sh makes it,
# ~20 min of SFT when missing) and JUDGE (default: STUDENT) are model directories; extra
# `rlx train` flags go in TRAIN_ARGS; EVAL_N and EVAL_K shrink the evals (default 16 tasks, k 8).
# A smoke test of one small step with a random model, rows kept out of docs/:
#   STUDENT=runs/learns/tiny EVAL_N=2 EVAL_K=1 ROWS=/tmp/judge-rows TRAIN_ARGS="--set max_steps=1 \
#     --set orchestrator.batch_size=8 --set orchestrator.max_tokens=16" bash experiments/scripts/judge_forth.sh smoke
# Expected wall time on 2 loaded EPYC cores: ~15 min for J1 (as row 7's 8 forth steps), ~30 for
# J2 (judge calls on every rollout), ~20 for J3, ~3 per eval: about 1.5 hours, plus the student.
set -euo pipefail
cd "$(dirname "$0")/../.."
RLX=${RLX:-dist/rlx}
BUN=${BUN:-node_modules/.bin/bun}
SET=${1:?usage: judge_forth.sh SET [SEED]   (a name for this run of the command, e.g. epyc-1)}
SEED=${2:-0}
OUT=runs/judges/$SET
ROWS=${ROWS:-experiments/results/judge_forth/$SET}
CONFIG=experiments/configs/judge_forth.toml
ARGS='{"kinds":["factorial","power"],"train_size":64,"eval_size":16}'
read -r -a EXTRA <<< "${TRAIN_ARGS:-}"
mkdir -p "$OUT" "$ROWS"

if [ -z "${STUDENT:-}" ]; then # the forth student of echo_forth.sh
  L=runs/learns
  [ -f $L/forth-tiny/config.json ] || $RLX init --preset tiny --seed 0 --out $L/forth-tiny > /dev/null
  mkdir -p $L/forth-data
  [ -s $L/forth-data/train.jsonl ] || $RLX env demos forth --n 64 --args "$ARGS" --out $L/forth-data/train.jsonl > /dev/null
  [ -f $L/forth-sft/model/config.json ] || $RLX sft experiments/configs/sft_forth_student.toml > $L/forth-sft.log 2>&1
  [ -f $L/forth-sft2/model/config.json ] || $RLX sft experiments/configs/sft_forth_student_more.toml > $L/forth-sft2.log 2>&1
  STUDENT=$L/forth-sft2/model
fi
JUDGE=${JUDGE:-$STUDENT}
JUDGE_PORT=8292
JUDGE_URL=http://127.0.0.1:$JUDGE_PORT/v1
echo "judge_forth $SET seed $SEED: student $STUDENT, judge $JUDGE; $(lscpu | sed -n 's/Model name: *//p'), $(nproc) cores"

EVAL_N=${EVAL_N:-16}
EVAL_K=${EVAL_K:-8}
evaluate() { [ -s "$2" ] || $RLX eval --model "$1" --env forth --args "$ARGS" --n $EVAL_N --k $EVAL_K --max-tokens 160 --seed 0 --out "$2" > /dev/null; }
last_weights() { ls -d "$1"/weights/step_* 2> /dev/null | sort -t_ -k2 -n | tail -1 || true; }
evaluate "$STUDENT" "$OUT/student-eval.json"

# the judge's context: the tiny preset's 4096 positions (a judge conversation that outgrows it is a
# failed rollout with the server's reason, counted in the row's error_rate)
RLX_THREADS=1 $RLX serve --model "$JUDGE" --served-model-name judge --port $JUDGE_PORT --max-model-len 4096 \
  --max-batch 64 > "$OUT/judge-serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2> /dev/null' EXIT
until curl -sf "http://127.0.0.1:$JUDGE_PORT/health" > /dev/null; do
  kill -0 $SERVER 2> /dev/null || { cat "$OUT/judge-serve.log" >&2; echo "the judge server exited" >&2; exit 1; }
  sleep 0.5
done

# arm ROW NAME ALGORITHM EXPERIMENT [--set ...]: one run, its eval, its row.
arm() {
  local id=$1 name=$2 algorithm=$3 experiment=$4 run=$OUT/$2-s$SEED
  shift 4
  [ -f "$ROWS/$name-s$SEED.json" ] && return
  rm -rf "$run"
  local load commit t0 code=0
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  commit=$(git describe --always --abbrev=7 --dirty=+changes)
  t0=$(date +%s)
  $RLX train $CONFIG --set output_dir="$run" --set seed="$SEED" --set model.path="$STUDENT" "$@" "${EXTRA[@]}" \
    > "$run.log" 2>&1 || code=$?
  local wall=$(($(date +%s) - t0)) weights
  [ $code = 0 ] || echo "$name: rlx train exited $code (log: $run.log): $(grep -m1 -i 'error' "$run.log" || true)" >&2
  weights=$(last_weights "$run")
  evaluate "${weights:-$STUDENT}" "$run/eval.json"
  $BUN experiments/scripts/row.ts --out "$ROWS/$name-s$SEED.json" --row "$id" --seed "$SEED" --algorithm "$algorithm" \
    --experiment "$experiment${weights:- (stopped before its first step: scores of the student)}" \
    --steps "$(grep -c '"rollouts/count"' "$run/metrics.jsonl" 2> /dev/null || true)" --before "forth=$OUT/student-eval.json" \
    --after "forth=$run/eval.json" --wall "$wall" --load-start "$load" --commit "$commit" \
    --command "rlx train $CONFIG $*"
  $BUN experiments/scripts/judge_stats.ts "$ROWS/$name-s$SEED.json" "$run" forth
}

arm J1 grpo grpo "GRPO on forth with the env's exact reward"
arm J2 grpo-judge "grpo + agentic judge" "GRPO on forth, reward = an agentic judge's verdict (the judge model served, with read_message, forth and verdict)" \
  --set "orchestrator.train.env[0].judge={type = \"agentic\", name = \"judge\", base_url = \"$JUDGE_URL\", max_turns = 6, max_tokens = 160}"
arm J3 credit agentic_credit "agentic credit assignment on forth: GRPO's advantage moved between turns by the judge model's per-turn weights (mix 0.5)" \
  --set "orchestrator.train.env[0].algo={type = \"agentic_credit\", mix = 0.5, judge = {name = \"judge\", base_url = \"$JUDGE_URL\", max_tokens = 160, concurrency = 8, timeout_s = 600}}"
echo "judge_forth $SET: rows in $ROWS"
