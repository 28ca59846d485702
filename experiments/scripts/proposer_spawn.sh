#!/usr/bin/env bash
# docs/results.md §13, proposer-solver through the orchestrator's groups: from the proposer warm
# start (role_warm_start, shared with multi_agent.sh), 100 steps of experiments/configs/
# proposer_spawn.toml at each of SEEDS (default 0 1), four arms: P1 the proposer's reward with
# R-Zero's repetition penalty (diversity 0.5), P0 learnability alone (diversity 0), both at the
# config's lr 2e-4; P1f and P0f the same at lr 5e-4 (faster: where §13's in-episode runs collapsed
# onto a few trivial proposals); P2 and P2f Absolute Zero's reward instead of learnability
# (frontier = "hardness": 1 - p inside (0, 1), a moving target), at 2e-4 and 5e-4. Each proposal's
# solvers are a spawned group of the `solve` env, and its reward waits on them in the barrier book.
# Each run keeps per-step curves of the frontier share (valid proposals whose solvers' pass rate is
# strictly between 0 and 1), the pass rate, the repetition and validity, and the solvers' greedy
# held-out accuracy every 10 steps on fixed sets (solve1: 40 one-operation 1-digit facts; solve2:
# 200 2-digit seed problems); before and after are scored by `rlx eval` on the same sets. Rows
# under experiments/results/proposer_spawn/SET/ (row.ts); a row that exists is not run again.
# proposer_table.ts writes §13's table from them.
#
#   bash experiments/scripts/proposer_spawn.sh SET          e.g. SET=epyc-1 (a name for this run of it)
#   SEEDS="0 1" bash experiments/scripts/proposer_spawn.sh SET
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/scripts/run_tools.sh
RLX=${RLX:-dist/rlx}
BUN=node_modules/.bin/bun
SET=${1:?usage: proposer_spawn.sh SET   (a name for this run of the command, e.g. epyc-1)}
SEEDS=${SEEDS-0 1}
OUT=runs/proposer-spawn/$SET
ROWS=experiments/results/proposer_spawn/$SET
mkdir -p $OUT $ROWS

role_warm_start proposer 12000
WARM=runs/multi_agent/sft-proposer/model
score() { # MODEL OUT_PREFIX: greedy and k=8 on both fixed sets
  $RLX eval --model $1 --env proposer --args '{"format": "bare", "digits": 1, "eval_size": 40}' --n 40 --k 8 \
    --max-tokens 8 --seed 0 --out $2-solve1.json > /dev/null
  $RLX eval --model $1 --env proposer --args '{"format": "bare"}' --n 200 --k 8 --max-tokens 8 --seed 0 \
    --out $2-solve2.json > /dev/null
}
[ -s $OUT/warm-solve2.json ] || score $WARM $OUT/warm

for seed in $SEEDS; do
  for arm in diverse plain diverse-fast plain-fast hard hard-fast; do
    name=$arm-s$seed
    [ -f $ROWS/$name.json ] && continue
    frontier=learnability
    case $arm in
    diverse) id=P1 diversity=0.5 lr=2e-4 what="R-Zero's repetition penalty (diversity 0.5)" ;;
    plain) id=P0 diversity=0 lr=2e-4 what="learnability alone (diversity 0)" ;;
    diverse-fast) id=P1f diversity=0.5 lr=5e-4 what="R-Zero's repetition penalty (diversity 0.5), lr 5e-4" ;;
    plain-fast) id=P0f diversity=0 lr=5e-4 what="learnability alone (diversity 0), lr 5e-4" ;;
    hard) id=P2 diversity=0 lr=2e-4 frontier=hardness what="Absolute Zero's reward (frontier hardness)" ;;
    hard-fast) id=P2f diversity=0 lr=5e-4 frontier=hardness what="Absolute Zero's reward (frontier hardness), lr 5e-4" ;;
    esac
    run=$OUT/$name
    rm -rf $run
    timed $run.log $RLX train experiments/configs/proposer_spawn.toml --set output_dir=$run --set seed=$seed \
      --set "orchestrator.train.env[0].args.diversity=$diversity" --set trainer.optim.lr=$lr \
      --set "orchestrator.train.env[0].args.frontier=\"$frontier\""
    score "$(last_weights $run)" $run/eval
    $BUN experiments/scripts/row.ts --out $ROWS/$name.json --wall "$WALL" --load-start "$LOAD" --commit "$COMMIT" \
      --row $id --seed $seed --algorithm grpo --steps 100 \
      --experiment "proposer-solver, the solvers spawned groups of the solve env, 100 steps from the proposer warm start: $what" \
      --before solve1=$OUT/warm-solve1.json --before solve2=$OUT/warm-solve2.json \
      --after solve1=$run/eval-solve1.json --after solve2=$run/eval-solve2.json --run $run \
      --curves role/proposer/proposer/at_frontier,role/proposer/proposer/frontier,role/proposer/proposer/pass_rate,role/proposer/proposer/valid,role/proposer/proposer/repetition,role/proposer/proposer/reward,reward/solve,eval/solve1/pass@1,eval/solve2/pass@1,time/step \
      --delta "orchestrator.train.env[0].args.diversity=$diversity" --delta trainer.optim.lr=$lr \
      --delta "orchestrator.train.env[0].args.frontier=$frontier" \
      --command "rlx train experiments/configs/proposer_spawn.toml --set orchestrator.train.env[0].args.diversity=$diversity --set trainer.optim.lr=$lr --set orchestrator.train.env[0].args.frontier=\"$frontier\""
  done
done
