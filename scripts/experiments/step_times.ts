// Where a run's steps went, from its metrics.jsonl: the median over its step lines of each of
// time/step, time/train (trainer compute), time/reload (the policy server loading a published
// step) and time/publish (the trainer writing one), plus the size of the last published step on
// disk. lora_vs_full.sh stores it beside each row, so the two runs of a seed compare per step.
//
//   bun scripts/experiments/step_times.ts RUN_DIR     prints one JSON object
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

const runDir = process.argv[2];
if (!runDir) throw new Error("usage: step_times.ts RUN_DIR");
const rows = readFileSync(join(runDir, "metrics.jsonl"), "utf8")
  .split("\n")
  .filter((line) => line.trim())
  .map((line) => JSON.parse(line) as Record<string, number>)
  .filter((row) => row["time/train"] !== undefined);
const median = (key: string) => {
  const values = rows
    .map((row) => row[key])
    .filter((v): v is number => v !== undefined)
    .sort((a, b) => a - b);
  return values.length ? Number(values[Math.floor(values.length / 2)]!.toFixed(3)) : null;
};
const weights = join(runDir, "weights");
const last = readdirSync(weights)
  .filter((name) => name.startsWith("step_"))
  .sort((a, b) => Number(a.slice(5)) - Number(b.slice(5)))
  .at(-1)!;
const bytes = readdirSync(join(weights, last)).reduce((sum, file) => sum + statSync(join(weights, last, file)).size, 0);
console.log(
  JSON.stringify({
    steps: rows.length,
    step_s: median("time/step"),
    train_s: median("time/train"),
    reload_s: median("time/reload"),
    publish_s: median("time/publish"),
    published_mb: Number((bytes / 1e6).toFixed(2)),
  }),
);
