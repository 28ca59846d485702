#!/usr/bin/env bash
# bf16 autocast against float32 on the earlier quickstart's SFT warm-up (configs/examples/sft_warmup_three_envs.toml), on
# the CPU: the same tiny model (rlx init --seed S), data and schedule, `trainer.precision` the only
# difference, 2 seeds each. Prints the nll of steps 1-10 and of the last 10 steps per run, and the
# bf16 / f32 ratio of the final nll per seed (docs/gpu.md: bf16 must land within 10% of f32).
# Usage: [OUT=outputs/bf16_sft] bash experiments/scripts/bf16_sft.sh [STEPS=120] [SEEDS="0 1"]
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${1:-120}
SEEDS=${2:-0 1}
rlx="node_modules/.bin/bun src/main.ts"
out=${OUT:-outputs/bf16_sft}
mkdir -p "$out" outputs/demos
[ -s outputs/demos/math.jsonl ] || $rlx env demos math --n 64 --args '{"operations":["+"],"word_problems":false,"digits":1,"train_size":64,"eval_size":16}' --out outputs/demos/math.jsonl
[ -s outputs/demos/search.jsonl ] || $rlx env demos search --n 100 --out outputs/demos/search.jsonl
[ -s outputs/demos/forth.jsonl ] || $rlx env demos forth --n 100 --out outputs/demos/forth.jsonl
for seed in $SEEDS; do
  [ -f "$out/tiny-$seed/config.json" ] || $rlx init --preset tiny --seed "$seed" --out "$out/tiny-$seed" >/dev/null
  for precision in f32 bf16-autocast; do
    run="$out/$precision-$seed"
    [ -f "$run/model/config.json" ] && continue
    echo "[bf16_sft] seed $seed, $precision"
    $rlx sft configs/examples/sft_warmup_three_envs.toml --force --set output_dir="$run" --set model.path="$out/tiny-$seed" \
      --set trainer.precision="$precision" --set seed="$seed" --set trainer.steps="$STEPS" \
      --set eval.interval=100000 >"$run.log" 2>&1
  done
done
node_modules/.bin/bun -e '
const [out, seeds] = [process.argv[1], process.argv[2].split(" ")];
const rows = (p) => require("fs").readFileSync(p, "utf8").trim().split("\n").map(JSON.parse).filter((r) => typeof r.nll === "number");
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
console.log("seed  precision       nll 1-10  nll last 10");
for (const seed of seeds) {
  const last = {};
  for (const p of ["f32", "bf16-autocast"]) {
    const r = rows(`${out}/${p}-${seed}/metrics.jsonl`);
    last[p] = mean(r.slice(-10).map((x) => x.nll));
    console.log(`${seed.padEnd(5)} ${p.padEnd(15)} ${mean(r.slice(0, 10).map((x) => x.nll)).toFixed(4).padStart(8)}  ${last[p].toFixed(4).padStart(11)}`);
  }
  console.log(`${seed.padEnd(5)} bf16 / f32 final nll: ${(last["bf16-autocast"] / last.f32).toFixed(3)}`);
}' "$out" "$SEEDS"
