#!/usr/bin/env bash
# Experiment 13 (docs/results.md §13): self-play on Nim and proposer-solver on arithmetic with the
# solver panel inside the proposer's episode, each from a warm start taught the formats only
# (role_warm_start: role_demos.ts; a random tiny model never makes a legal move or a valid
# expression). Self-play's frozen opponent is the Nim warm start itself, served by `rlx serve` (one
# thread) on port 8331. Warm starts are built once and reused; RL runs at each of SEEDS (default
# 0 1), 60 steps each: M-n (selfplay_nim.toml), M-p (proposer_solver.toml, lr 5e-4) and M-p2 (the
# same at lr 2e-4). Each run is scored before and after by `rlx eval` (nim: greedy and 16 samples
# on the env's 50 held-out positions, a winning move counting; proposer: greedy and 8 samples on
# 200 two-digit seed problems) and keeps its per-role curves. Rows under
# experiments/results/multi_agent/SET/ (row.ts); a row that exists is not run again;
# multi_agent_table.ts writes §13's tables from them. (The spawned variant: proposer_spawn.sh.)
#
#   bash experiments/scripts/multi_agent.sh SET [nim|proposer|both]      e.g. SET=epyc-1
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/scripts/run_tools.sh
RLX=${RLX:-dist/rlx}
BUN=node_modules/.bin/bun
SET=${1:?usage: multi_agent.sh SET [nim|proposer|both]   (SET: a name for this run of it, e.g. epyc-1)}
WHICH=${2:-both}
SEEDS=${SEEDS-0 1}
OUT=runs/multi_agent/$SET
ROWS=experiments/results/multi_agent/$SET
mkdir -p $OUT $ROWS

# row ID SEED RUN BEFORE AFTER CURVES WHAT ALGORITHM COMMAND...
row() {
  $BUN experiments/scripts/row.ts --out $ROWS/$1-s$2.json --wall "$WALL" --load-start "$LOAD" --commit "$COMMIT" \
    --row $1 --seed $2 --algorithm "$8" --steps 60 --experiment "$7" --before $4 --after $5 --run $3 --curves $6 \
    --command "${*:9}"
}

if [ "$WHICH" != proposer ] && { [ ! -f $ROWS/M-n-s0.json ] || [ ! -f $ROWS/M-n-s1.json ]; }; then
  role_warm_start nim 4000
  WARM=runs/multi_agent/sft-nim/model
  nim_eval() { $RLX eval --model $1 --env nim --args '{"format": "bare"}' --n 50 --k 16 --max-tokens 8 --seed 0 --out $2 > /dev/null; }
  [ -s $OUT/warm-nim.json ] || nim_eval $WARM $OUT/warm-nim.json
  RLX_THREADS=1 $RLX serve --model $WARM --served-model-name start --port 8331 --max-batch 256 > $OUT/start.log 2>&1 &
  SERVER=$!
  trap 'kill $SERVER 2>/dev/null || true' EXIT
  until curl -sf http://127.0.0.1:8331/health > /dev/null; do sleep 0.5; done
  for seed in $SEEDS; do
    [ -f $ROWS/M-n-s$seed.json ] && continue
    run=$OUT/selfplay-nim-s$seed
    rm -rf $run
    timed $run.log $RLX train experiments/configs/selfplay_nim.toml --set output_dir=$run --set seed=$seed
    nim_eval "$(last_weights $run)" $run/eval.json
    # the per-pile probe of its last weights, kept beside the row (nim_probe.py)
    RLX_THREADS=1 $RLX serve --model "$(last_weights $run)" --served-model-name m --port 8450 > $run/probe-serve.log 2>&1 &
    PROBE=$!
    until curl -sf http://127.0.0.1:8450/health > /dev/null; do sleep 0.5; done
    python3 experiments/scripts/nim_probe.py 8450 bare > $ROWS/M-n-s$seed-probe.txt
    kill $PROBE
    row M-n $seed $run move=$OUT/warm-nim.json move=$run/eval.json \
      role/vs_start/first/reward,role/selfplay/first/first_wins,role/selfplay/first/illegal,entropy,eval/move/pass@1,time/step \
      "nim self-play, 60 steps from the habit warm start: rae, both roles the live policy" rae \
      rlx train experiments/configs/selfplay_nim.toml
  done
  kill $SERVER 2>/dev/null || true
fi
if [ "$WHICH" != nim ]; then
  role_warm_start proposer 12000
  WARM=runs/multi_agent/sft-proposer/model
  solve_eval() { $RLX eval --model $1 --env proposer --args '{"format": "bare"}' --n 200 --k 8 --max-tokens 8 --seed 0 --out $2 > /dev/null; }
  [ -s $OUT/warm-solve.json ] || solve_eval $WARM $OUT/warm-solve.json
  for seed in $SEEDS; do
    for id in M-p M-p2; do
      [ -f $ROWS/$id-s$seed.json ] && continue
      lr=$([ $id = M-p ] && echo 5e-4 || echo 2e-4)
      run=$OUT/$id-s$seed
      rm -rf $run
      timed $run.log $RLX train experiments/configs/proposer_solver.toml --set output_dir=$run --set seed=$seed \
        --set trainer.optim.lr=$lr
      solve_eval "$(last_weights $run)" $run/eval.json
      row $id $seed $run solve=$OUT/warm-solve.json solve=$run/eval.json \
        role/proposer/proposer/pass_rate,role/proposer/proposer/frontier,role/proposer/proposer/valid,role/proposer/proposer/reward,role/proposer/solver/reward,time/step \
        "proposer-solver, the solver panel inside the episode, 60 steps from the proposer warm start: hierarchical_grpo, lr $lr" \
        hierarchical_grpo rlx train experiments/configs/proposer_solver.toml --set trainer.optim.lr=$lr
    done
  done
fi
