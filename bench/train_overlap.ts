// The overlap async RL buys (DESIGN §2, §10): the same `rlx train` run with max_async_level = 0
// (generate step N+1 only after the trainer published step N) and 1 (generate step N+1 while the
// trainer trains step N), side by side in one command, rounds alternating. Prints the median step
// time (steps 2.. of each run; step 1 has no overlap to gain) with its parts, and the ratio.
//
//   bun bench/train_overlap.ts [--steps 8] [--batch 32] [--group 8] [--tokens 48] [--rounds 2] [--inference spawn|in-process]
//
// A tiny random model on an env whose reward is the share of lowercase letters in the reply (every
// group has something to train, so every step is a real step), policy spawned as `rlx serve`.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { initModel } from "../src/model/presets.ts";
import { LETTERS_ENV } from "../test/e2e/train_helpers.ts";
import { flag, median, printTable } from "./_reference.ts";

const steps = Number(flag("steps", "8"));
const batch = Number(flag("batch", "32"));
const group = Number(flag("group", "8"));
const tokens = Number(flag("tokens", "48"));
const rounds = Number(flag("rounds", "2"));
const inference = flag("inference", "spawn");

const dir = mkdtempSync(join(tmpdir(), "rlx-bench-overlap-"));
const model = join(dir, "tiny");
await initModel({ preset: "tiny", out: model, seed: 0, dtype: "f32" });
writeFileSync(join(dir, "letters.ts"), LETTERS_ENV);

type Row = Record<string, number>;

function run(asyncLevel: number, round: number): { wall: number; rows: Row[] } {
  const runDir = join(dir, `async${asyncLevel}-r${round}`);
  const config = join(dir, `async${asyncLevel}-r${round}.toml`);
  writeFileSync(config, `output_dir = ${JSON.stringify(runDir)}
max_steps = ${steps}
model = { path = ${JSON.stringify(model)} }
[trainer.optim]
lr = 1e-4
[orchestrator]
batch_size = ${batch}
group_size = ${group}
seq_len = 256
max_tokens = ${tokens}
max_async_level = ${asyncLevel}
[inference]
port = ${20000 + Math.floor(Math.random() * 20000)}
[[orchestrator.train.env]]
id = ${JSON.stringify(join(dir, "letters.ts"))}
name = "letters"
`);
  const started = performance.now();
  const proc = Bun.spawnSync([process.execPath, join(import.meta.dir, "../src/main.ts"), "train", config, "--inference", inference], { stdout: "pipe", stderr: "pipe" });
  const wall = (performance.now() - started) / 1000;
  if (proc.exitCode !== 0) throw new Error(`rlx train failed:\n${proc.stderr.toString()}`);
  const rows = readFileSync(join(runDir, "metrics.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line) as Row);
  return { wall, rows: rows.filter((row) => row.step! >= 2) };
}

const keys = ["time/step", "time/rollouts", "time/wait_for_policy", "time/train", "time/trainer_wait", "time/reload"] as const;
const results = new Map<number, { walls: number[]; rows: Row[] }>([[0, { walls: [], rows: [] }], [1, { walls: [], rows: [] }]]);
for (let round = 0; round < rounds; round++) {
  for (const level of round % 2 ? [1, 0] : [0, 1]) {
    const { wall, rows } = run(level, round);
    results.get(level)!.walls.push(wall);
    results.get(level)!.rows.push(...rows);
  }
}

const med = (level: number, key: string) => median(results.get(level)!.rows.map((row) => row[key] ?? 0));
console.log(`rlx train, tiny model, ${steps} steps of ${batch} rollouts (groups of ${group}, ${tokens} new tokens), policy ${inference}; medians over steps 2..${steps} of ${rounds} round(s)\n`);
printTable([
  ["max_async_level", "wall s", ...keys.map((k) => `${k.slice(5)} s`)],
  ...[0, 1].map((level) => [level, median(results.get(level)!.walls).toFixed(1), ...keys.map((k) => med(level, k).toFixed(3))]),
]);
console.log(`\nstep time async 0 / async 1: ${(med(0, "time/step") / med(1, "time/step")).toFixed(2)}x`);
rmSync(dir, { recursive: true, force: true });
