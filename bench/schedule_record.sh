#!/usr/bin/env bash
# What the schedule record (src/engine/schedule.ts: every generator call of the policy engines, in
# RUN/schedule/, for `rlx replay --rollouts`) costs a training step: the quickstart
# (configs/quickstart.toml from its SFT warm-up) and the three-environment mix
# (configs/examples/three_envs.toml from its warm model, bench/_warm_three_envs.sh), each run
# STEPS steps with inference.record_schedule on and off, the order alternating by round. Prints
# each pair's mean step time over steps 3..STEPS-1 (bench/step_times.ts), the ratio on/off, the
# means of the rollouts and of the trainer's compute (the record can only lengthen the first), and
# the record's bytes per step. bench/schedule_engine.ts times the recorder alone. With
# DETERMINISTIC=1 the runs are `deterministic = true` (max_async_level 0, policy in-process, prefix
# caching off), so both of a pair sample the same rollouts and train the same tokens: what differs
# is the record (asynchronous runs sample different rollouts each time, and their work moves by
# more than the record could).
#
#   bash bench/schedule_record.sh     STEPS=12 ROUNDS=2 ONLY= (quickstart or three_envs) DETERMINISTIC= by default
#
# Runs go to runs/bench/schedule_record/ (ignored); the warm models are made once.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-12}
ROUNDS=${ROUNDS:-2}
W=runs/bench/schedule_record
BUN=$PWD/node_modules/.bin/bun
RLX=dist/rlx
mkdir -p $W
echo "schedule_record: $(lscpu | sed -n 's/Model name: *//p'), $(nproc) cores, $(git describe --always --dirty=+changes), load $(cut -d' ' -f1-3 /proc/loadavg)"

source bench/_warm_three_envs.sh
warm_three_envs runs/bench/quickstart_step
WARM_ONLY=1 bash scripts/quickstart.sh > $W/quickstart-warm.log 2>&1 || { tail -20 $W/quickstart-warm.log; exit 1; }

# run NAME CONFIG MODEL on|off: STEPS steps; prints the mean step time and the record's bytes a step
run() {
  local out=$W/$1-$4-r$round
  rm -rf "$out"
  $RLX train "$2" --set output_dir="$out" --set model.path="$3" --set max_steps="$STEPS" \
    --set inference.record_schedule=$([ "$4" = on ] && echo true || echo false) \
    ${DETERMINISTIC:+--set deterministic=true --set orchestrator.max_async_level=0} > "$out.log" 2>&1 ||
    { tail -20 "$out.log"; exit 1; }
  local bytes=0
  [ -d "$out/schedule" ] && bytes=$(cat "$out"/schedule/*.jsonl | wc -c)
  $BUN bench/step_times.ts "$out" --from 3 --to $((STEPS - 1)) |
    $BUN -e 'const t = JSON.parse(await Bun.stdin.text()); console.log(JSON.stringify({ step_mean_s: t.step_mean_s, rollouts_mean_s: t.rollouts_mean_s, train_mean_s: t.train_mean_s, bytes_per_step: Math.round(Number(process.argv[1]) / Number(process.argv[2])) }))' "$bytes" "$STEPS" |
    tee "$out.json"
}

pair() { # pair NAME CONFIG MODEL: on and off, in the round's order, and the ratio
  local first=on second=off
  [ $((round % 2)) = 0 ] && first=off second=on
  echo "-- $1 ($first first)"
  run "$1" "$2" "$3" $first
  run "$1" "$2" "$3" $second
  $BUN -e 'const [on, off] = process.argv.slice(1, 3).map((p) => require(p));
    console.log(`round ${process.argv[4]}, ${process.argv[3]}: recording on ${on.step_mean_s} s, off ${off.step_mean_s} s: ${(on.step_mean_s / off.step_mean_s).toFixed(3)}x (rollouts ${on.rollouts_mean_s} / ${off.rollouts_mean_s} s, trainer ${on.train_mean_s} / ${off.train_mean_s} s); ${(on.bytes_per_step / 1024).toFixed(1)} KiB a step`);' \
    "$PWD/$W/$1-on-r$round.json" "$PWD/$W/$1-off-r$round.json" "$1" "$round"
}

for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round (load $(cut -d' ' -f1-3 /proc/loadavg))"
  [ "${ONLY:-quickstart}" = quickstart ] && pair quickstart configs/quickstart.toml outputs/sft-quickstart/model
  [ "${ONLY:-three_envs}" = three_envs ] && pair three_envs configs/examples/three_envs.toml runs/bench/quickstart_step/warm/model
  true
done
