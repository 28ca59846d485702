// Where a run's steps went, from its metrics.jsonl: the median over its step lines of each of
// time/step, time/train (trainer compute), time/reload (the policy server loading a published
// step) and time/publish (the trainer writing one), their means, the trainer's idle share (its time
// waiting for a batch over that and its compute), and the size of the last published step on disk.
// experiments/scripts/lora_vs_full.sh stores it beside each row, so the two runs of a seed compare per step;
// bench/quickstart_step.sh reads the means of steps FROM..TO.
//
//   bun bench/step_times.ts RUN_DIR... [--from N] [--to N]   one JSON object per run
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

const args = process.argv.slice(2);
const option = (name: string) => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args.splice(at, 2)[1]) : undefined;
};
const from = option("--from") ?? 1;
const to = option("--to") ?? Infinity;
if (args.length === 0) throw new Error("usage: step_times.ts RUN_DIR... [--from N] [--to N]");

const round = (x: number | null) => (x === null ? null : Number(x.toFixed(3)));

function stepTimes(runDir: string) {
  const rows = readFileSync(join(runDir, "metrics.jsonl"), "utf8")
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line) as Record<string, number>)
    .filter((row) => row["time/train"] !== undefined && row.step! >= from && row.step! <= to);
  const values = (key: string) => rows.map((row) => row[key]).filter((v): v is number => v !== undefined);
  const median = (key: string) => {
    const sorted = values(key).sort((a, b) => a - b);
    return round(sorted.length ? sorted[Math.floor(sorted.length / 2)]! : null);
  };
  const sum = (key: string) => values(key).reduce((a, b) => a + b, 0);
  const mean = (key: string) => round(values(key).length ? sum(key) / values(key).length : null);
  const weights = join(runDir, "weights");
  const last = readdirSync(weights)
    .filter((name) => name.startsWith("step_"))
    .sort((a, b) => Number(a.slice(5)) - Number(b.slice(5)))
    .at(-1)!;
  const bytes = readdirSync(join(weights, last)).reduce(
    (total, file) => total + statSync(join(weights, last, file)).size,
    0,
  );
  return {
    run: runDir,
    steps: rows.length,
    step_s: median("time/step"),
    train_s: median("time/train"),
    reload_s: median("time/reload"),
    publish_s: median("time/publish"),
    step_mean_s: mean("time/step"),
    rollouts_mean_s: mean("time/rollouts"),
    train_mean_s: mean("time/train"),
    trainer_idle: round(sum("time/trainer_wait") / (sum("time/trainer_wait") + sum("time/train"))),
    published_mb: Number((bytes / 1e6).toFixed(2)),
  };
}

for (const runDir of args) console.log(JSON.stringify(stepTimes(runDir)));
