// Writes one result of experiments/scripts/reproduce.sh as JSON: which row of docs/results.md it
// is, the scores before and after (eval-200 greedy pass@1, pass@1 and pass@8 per env, read from
// `rlx eval --out` files), and where it was measured: wall time, load averages at start and end,
// the CPU model (`lscpu`), the git commit and the date. results_table.ts builds the table from
// these files; nothing in the table is typed by hand. experiments/scripts/objectives.sh writes its
// rows with it too, adding the run's config delta (--delta, one per --set) and, with --run, the
// run's per-step entropy, clipped and masked curves and its rl loss (run_metrics.ts).
//
//   bun experiments/scripts/row.ts --out FILE --row 2 --seed 0 --algorithm grpo --experiment "..."
//     [--before ENV=EVAL.json]... --after ENV=EVAL.json... --wall SECONDS --load-start "1 5 15"
//     [--band BAND.json] [--steps N] [--commit C] [--delta KEY=VALUE]... [--run RUN_DIR]
//     [--obs-before OBS.json] [--obs-after OBS.json] [--kl KL.json] [--curves KEY,KEY] --command "..."
//
// --obs-before/--obs-after: experiments/scripts/obs_loss.ts --json files, the held-out nll of what
// the env said back (echo_calc.sh's rows). --kl: a policy_kl.ts --json file, how far training moved
// the policy from its start. --curves: the metrics.jsonl keys --run records (default run_metrics.ts's).
//
// --commit is the checkout the run started from (reproduce.sh takes it when the run starts);
// without it, the checkout now.
import { execSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { parseArgs } from "node:util";
import { type ObsScore, type ResultRow, type Scores } from "./results_rows.ts";
import { runCurves, runLoss } from "./run_metrics.ts";

const { values } = parseArgs({
  options: {
    out: { type: "string" },
    row: { type: "string" },
    seed: { type: "string" },
    algorithm: { type: "string" },
    experiment: { type: "string" },
    before: { type: "string", multiple: true, default: [] },
    after: { type: "string", multiple: true, default: [] },
    wall: { type: "string" },
    "load-start": { type: "string" },
    band: { type: "string" },
    steps: { type: "string" },
    command: { type: "string" },
    commit: { type: "string" },
    delta: { type: "string", multiple: true },
    run: { type: "string" },
    "obs-before": { type: "string" },
    "obs-after": { type: "string" },
    kl: { type: "string" },
    curves: { type: "string" },
  },
  strict: true,
});
for (const key of ["out", "row", "seed", "algorithm", "experiment", "wall", "load-start", "command"] as const) {
  if (values[key] === undefined) throw new Error(`row.ts: --${key} is required`);
}
if (values.after.length === 0) throw new Error("row.ts: at least one --after ENV=EVAL.json is required");

interface EvalFile {
  envs: Array<{ metrics: Record<string, number> }>;
}

/** ENV=FILE pairs -> the three headline scores per env. */
function scores(pairs: string[]): Record<string, Scores> {
  return Object.fromEntries(
    pairs.map((pair) => {
      const [env, file] = pair.split("=") as [string, string];
      const metrics = (JSON.parse(readFileSync(file, "utf8")) as EvalFile).envs[0]!.metrics;
      return [
        env,
        {
          greedy: metrics["greedy/pass@1"]!,
          pass1: metrics["pass@1"]!,
          pass8: metrics["pass@8"]!,
        },
      ];
    }),
  );
}

/** An obs_loss.ts --json file -> the row's observation scores. */
function observation(file: string): ObsScore {
  const { nll, digitNll, tokens } = JSON.parse(readFileSync(file, "utf8")) as ObsScore;
  return { nll, digitNll, tokens };
}

const loads = (text: string) => text.trim().split(/\s+/).slice(0, 3).map(Number);
const cpu = /Model name:\s*(.+)/.exec(execSync("lscpu", { encoding: "utf8" }))?.[1]?.trim() ?? "unknown";
const commit =
  values.commit ??
  execSync("git describe --always --abbrev=7 --dirty=+changes", {
    encoding: "utf8",
  }).trim();

const row: ResultRow = {
  row: values.row!,
  experiment: values.experiment!,
  algorithm: values.algorithm!,
  seed: Number(values.seed),
  before: values.before.length ? scores(values.before) : undefined,
  after: scores(values.after),
  band: values.band ? JSON.parse(readFileSync(values.band, "utf8")) : undefined,
  steps: values.steps ? Number(values.steps) : undefined,
  config: values.delta,
  loss: values.run ? runLoss(values.run) : undefined,
  curves: values.run ? runCurves(values.run, values.curves?.split(",")) : undefined,
  obs: values["obs-after"]
    ? {
        before: values["obs-before"] ? observation(values["obs-before"]) : undefined,
        after: observation(values["obs-after"]),
      }
    : undefined,
  kl_to_start: values.kl ? (JSON.parse(readFileSync(values.kl, "utf8")) as { kl: number }).kl : undefined,
  wall_s: Math.round(Number(values.wall)),
  load: {
    start: loads(values["load-start"]!),
    end: loads(readFileSync("/proc/loadavg", "utf8")),
  },
  cpu,
  cores: Number(execSync("nproc", { encoding: "utf8" }).trim()),
  commit,
  date: new Date().toISOString(),
  command: values.command!,
};
mkdirSync(dirname(values.out!), { recursive: true });
writeFileSync(values.out!, `${JSON.stringify(row, null, 2)}\n`);
console.log(`row ${row.row} seed ${row.seed}: ${JSON.stringify(row.after)} -> ${values.out}`);
