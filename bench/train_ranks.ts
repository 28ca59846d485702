// rlx train with 1 and 2 data-parallel trainer ranks (docs/scaling.md), the same run otherwise, in one
// command, rounds alternating. Prints each configuration's thread settings, the trainer's tokens/s
// (batch tokens over the step's train time: the all-reduced step on all ranks), the step time and
// the run's wall time, and the ratio against one rank.
//
//   bun bench/train_ranks.ts [--steps 6] [--batch 32] [--group 8] [--tokens 48] [--rounds 2] [--ranks 2]
//
// Threads are what rlx train gives by default (src/processes/trainer_ranks.ts): one rank and one
// policy server each get one thread per core (as before ranks existed); with N ranks every rank
// and the server get cores / (N + 1), at least 1. A third configuration pins the single rank to
// the thread count one of the N ranks gets, which separates "more processes" from "fewer threads".
// On a machine with fewer cores than ranks + servers this is not a scaling result: the ranks
// share the same cores, and the all-reduce and the second process's overhead come on top.
import { rmSync } from "node:fs";
import { cpus } from "node:os";
import { lettersRun, lettersWorkspace, type Row } from "./_letters_run.ts";
import { flag, median, printTable } from "./_reference.ts";

const steps = Number(flag("steps", "6"));
const batch = Number(flag("batch", "32"));
const group = Number(flag("group", "8"));
const tokens = Number(flag("tokens", "48"));
const rounds = Number(flag("rounds", "2"));
const ranks = Number(flag("ranks", "2"));
const cores = cpus().length;

const dir = await lettersWorkspace("rlx-bench-ranks-");

interface Setup {
  name: string;
  world: number;
  /** trainer.threads; 0 = rlx train's default. */
  threads: number;
  threadsLabel: string;
}

const share = Math.max(1, Math.floor(cores / (ranks + 1)));
const setups: Setup[] = [
  { name: "1 rank", world: 1, threads: 0, threadsLabel: `trainer ${cores}, server ${cores}` },
  { name: `1 rank, ${share} thread(s)`, world: 1, threads: share, threadsLabel: `trainer ${share}, server ${cores}` },
  { name: `${ranks} ranks`, world: ranks, threads: 0, threadsLabel: `${ranks} x trainer ${share}, server ${share}` },
];

function run(setup: Setup, round: number): { wall: number; rows: Row[] } {
  const trainer = [`world_size = ${setup.world}`, `threads = ${setup.threads}`];
  return lettersRun(dir, `${setup.world}x${setup.threads}-r${round}`, { steps, batch, group, tokens }, { trainer });
}

const results = setups.map(() => ({ walls: [] as number[], rows: [] as Row[] }));
for (let round = 0; round < rounds; round++) {
  const order = setups.map((_, i) => i);
  if (round % 2) order.reverse();
  for (const i of order) {
    const { wall, rows } = run(setups[i]!, round);
    results[i]!.walls.push(wall);
    results[i]!.rows.push(...rows);
  }
}

const med = (i: number, key: string) => median(results[i]!.rows.map((row) => row[key] ?? 0));
console.log(
  `rlx train, preset tiny, ${steps} steps of ${batch} rollouts (groups of ${group}, ${tokens} new tokens), one spawned policy server, ${cores} cores; medians over steps 2..${steps} of ${rounds} round(s)\n`,
);
printTable([
  ["configuration", "threads", "train tok/s", "vs 1 rank", "train s", "step s", "wall s"],
  ...setups.map((setup, i) => [
    setup.name,
    setup.threadsLabel,
    Math.round(med(i, "throughput/train_tokens_per_s")),
    `${(med(i, "throughput/train_tokens_per_s") / med(0, "throughput/train_tokens_per_s")).toFixed(2)}x`,
    med(i, "time/train").toFixed(3),
    med(i, "time/step").toFixed(3),
    median(results[i]!.walls).toFixed(1),
  ]),
]);
rmSync(dir, { recursive: true, force: true });
