// The overlap async RL buys (docs/architecture.md §2, §10): the same `rlx train` run with max_async_level = 0
// (generate step N+1 only after the trainer published step N) and 1 (generate step N+1 while the
// trainer trains step N), side by side in one command, rounds alternating. Prints the median step
// time (steps 2.. of each run; step 1 has no overlap to gain) with its parts, and the ratio.
//
//   bun bench/train_overlap.ts [--steps 8] [--batch 32] [--group 8] [--tokens 48] [--rounds 2] [--inference spawn|in-process]
//
// The run is bench/_letters_run.ts's (a tiny random model on the letters env); the policy is
// spawned as `rlx serve` unless --inference in-process.
import { rmSync } from "node:fs";
import { lettersRun, lettersWorkspace, type Row } from "./_letters_run.ts";
import { flag, median, printTable } from "./_reference.ts";

const steps = Number(flag("steps", "8"));
const batch = Number(flag("batch", "32"));
const group = Number(flag("group", "8"));
const tokens = Number(flag("tokens", "48"));
const rounds = Number(flag("rounds", "2"));
const inference = flag("inference", "spawn");

const dir = await lettersWorkspace("rlx-bench-overlap-");
const shape = { steps, batch, group, tokens };
const run = (asyncLevel: number, round: number) =>
  lettersRun(dir, `async${asyncLevel}-r${round}`, shape, {
    orchestrator: [`max_async_level = ${asyncLevel}`],
    args: ["--inference", inference],
  });

const keys = [
  "time/step",
  "time/rollouts",
  "time/wait_for_policy",
  "time/train",
  "time/trainer_wait",
  "time/reload",
] as const;
const results = new Map<number, { walls: number[]; rows: Row[] }>([
  [0, { walls: [], rows: [] }],
  [1, { walls: [], rows: [] }],
]);
for (let round = 0; round < rounds; round++) {
  for (const level of round % 2 ? [1, 0] : [0, 1]) {
    const { wall, rows } = run(level, round);
    results.get(level)!.walls.push(wall);
    results.get(level)!.rows.push(...rows);
  }
}

const med = (level: number, key: string) => median(results.get(level)!.rows.map((row) => row[key] ?? 0));
console.log(
  `rlx train, tiny model, ${steps} steps of ${batch} rollouts (groups of ${group}, ${tokens} new tokens), policy ${inference}; medians over steps 2..${steps} of ${rounds} round(s)\n`,
);
printTable([
  ["max_async_level", "wall s", ...keys.map((k) => `${k.slice(5)} s`)],
  ...[0, 1].map((level) => [
    level,
    median(results.get(level)!.walls).toFixed(1),
    ...keys.map((k) => med(level, k).toFixed(3)),
  ]),
]);
console.log(`\nstep time async 0 / async 1: ${(med(0, "time/step") / med(1, "time/step")).toFixed(2)}x`);
rmSync(dir, { recursive: true, force: true });
