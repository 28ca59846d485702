#!/usr/bin/env bash
# Long rows through the whole pipeline (docs/scaling.md, "Long context"): rlx init tiny-long with
# the bare template, then a run of CONFIG (default experiments/configs/recall_long.toml: 3 steps,
# two context-parallel ranks, 16k-token recall episodes), then one JSON row from the run's audit
# records: how many samples each step trained and their token counts, the rewards, the CPU, and the
# run's exit status (a run that stops early still gets its row). With SEED set, the run takes that
# seed and its own directory (output_dir-seedN), and the row's name ends in -seedN. ROW_ONLY=1
# writes the row of a run made before (its wall time and exit status then null).
#   [SEED=N] [ROW_ONLY=1] bash experiments/scripts/recall_long.sh SET [CONFIG]
#     -> experiments/results/long_context/SET/<CONFIG's name>[-seedN].json
set -euo pipefail
cd "$(dirname "$0")/../.."
SET=${1:?usage: recall_long.sh SET [CONFIG]}
config=${2:-experiments/configs/recall_long.toml}
RLX=${RLX:-dist/rlx}
out=experiments/results/long_context/$SET
run=$(sed -n 's/^output_dir = "\(.*\)"/\1/p' "$config")
name=$(basename "$config" .toml)
overrides=()
if [ -n "${SEED:-}" ]; then
  run=$run-seed$SEED name=$name-seed$SEED
  overrides=(--set "seed=$SEED" --set "output_dir=$run")
fi
mkdir -p "$out" runs/models
[ -d runs/models/tiny-long-bare ] ||
  $RLX init --preset tiny-long --chat-template configs/templates/bare.jinja --out runs/models/tiny-long-bare
status=0 seconds=
if [ -z "${ROW_ONLY:-}" ]; then
  rm -rf "$run"
  start=$(date +%s)
  $RLX train "$config" "${overrides[@]}" || status=$?
  seconds=$(($(date +%s) - start))
fi
node_modules/.bin/bun -e '
const { readFileSync, readdirSync, writeFileSync } = require("node:fs");
const { cpus } = require("node:os");
const [dir, out, seconds, status] = process.argv.slice(1);
const steps = readdirSync(`${dir}/rollouts`).filter((f) => /^step_\d+\.jsonl$/.test(f));
const trained = steps.map((f) => {
  const records = readFileSync(`${dir}/rollouts/${f}`, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  return { step: records[0].step, samples: records.length, tokens: records.map((r) => r.token_ids.length), rewards: records.map((r) => r.reward) };
}).sort((a, b) => a.step - b.step);
const metrics = readFileSync(`${dir}/metrics.jsonl`, "utf8").trim().split("\n").map((l) => JSON.parse(l));
const known = seconds !== "";
const row = { date: new Date().toISOString(), cpu: cpus()[0].model, cores: cpus().length,
  seconds: known ? Number(seconds) : null, exit: known ? Number(status) : null, steps: metrics.length,
  step_seconds: Math.round(metrics.reduce((s, m) => s + m["time/step"], 0)), trained,
  reward: metrics.map((m) => m.reward), entropy: metrics.map((m) => m.entropy),
  empty_retries: metrics.map((m) => m["batch/empty_retries"]),
  context_parallel: metrics.map((m) => m.context_parallel), loss: metrics.map((m) => m.loss),
  mismatch_kl: metrics.map((m) => m.mismatch_kl) };
writeFileSync(out, JSON.stringify(row, null, 2) + "\n");
console.log(JSON.stringify(row));
' "$run" "$out/$name.json" "$seconds" "$status"
exit $status
