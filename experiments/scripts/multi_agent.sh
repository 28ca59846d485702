#!/usr/bin/env bash
# Experiment 13 (docs/results.md §13): self-play on Nim and proposer-solver on arithmetic, each from a
# warm start taught the formats only (role_demos.ts; a random tiny model never makes a legal move
# or a valid expression). Self-play's frozen opponent is the Nim warm start itself, served by
# `rlx serve` (one thread) on port 8331. Warm starts are built once and reused; RL runs per seed.
# Afterwards role_curves.ts prints each run's curve (the mean of every 10 steps).
#
#   bash experiments/scripts/multi_agent.sh [SEED] [nim|proposer|both] [rlx train arguments...]
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PWD/node_modules/.bin:$PATH # bun, for the .ts helpers
source experiments/scripts/run_tools.sh
RLX=${RLX:-dist/rlx}
OUT=runs/multi_agent
SEED=${1:-0}
WHICH=${2:-both}
shift $(($# < 2 ? $# : 2))
mkdir -p $OUT


if [ "$WHICH" != proposer ]; then
  role_warm_start nim 4000
  RLX_THREADS=1 $RLX serve --model $OUT/sft-nim/model --served-model-name start --port 8331 --max-batch 256 > $OUT/start.log 2>&1 &
  trap 'kill $(jobs -p) 2>/dev/null' EXIT
  until curl -sf http://127.0.0.1:8331/health > /dev/null; do sleep 0.5; done
  RUN=$OUT/selfplay-nim-s$SEED
  rm -rf $RUN
  /usr/bin/time -f "wall %e s" $RLX train experiments/configs/selfplay_nim.toml --set output_dir=$RUN --set seed=$SEED "$@" 2>&1 | tee $RUN.log
  kill $(jobs -p) 2>/dev/null || true
  bun experiments/scripts/role_curves.ts $RUN role/vs_start/first/reward role/selfplay/first/first_wins role/selfplay/first/illegal
fi
if [ "$WHICH" != nim ]; then
  role_warm_start proposer 12000
  RUN=$OUT/proposer-solver-s$SEED
  rm -rf $RUN
  /usr/bin/time -f "wall %e s" $RLX train experiments/configs/proposer_solver.toml --set output_dir=$RUN --set seed=$SEED "$@" 2>&1 | tee $RUN.log
  bun experiments/scripts/role_curves.ts $RUN role/proposer/proposer/pass_rate role/proposer/proposer/frontier \
    role/proposer/proposer/valid role/proposer/solver/reward
fi
