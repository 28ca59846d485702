// The docs/results.md table of experiments/scripts/sampling.sh: one line per sampler of a set,
// from its row files (row.ts) and budget files (sampling_budget.ts) under experiments/results/sampling/SET/:
// the seeds, steps trained, rollouts generated and the share of trained groups with signal, then
// eval-200 greedy pass@1 / pass@1 / pass@8 per operation as mean ±s.e. over the seeds (the s.e. of
// two seeds is half their difference), and the wall time with the 1-minute load at its start.
//
//   bun experiments/scripts/sampling_table.ts SET [SAMPLER...]
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ResultRow } from "./results_rows.ts";

const [set, ...order] = process.argv.slice(2);
if (!set) throw new Error("usage: sampling_table.ts SET [SAMPLER...]");
const dir = join("experiments/results/sampling", set);
interface Budget {
  steps: number;
  generated: number;
  signal_share: number;
}
const runs = readdirSync(dir)
  .filter((f) => /-s\d+\.json$/.test(f))
  .map((f) => {
    const [, sampler, seed] = /^(.+)-s(\d+)\.json$/.exec(f)!;
    const budgetFile = join(dir, f.replace(/\.json$/, ".budget.json"));
    return {
      sampler: sampler!,
      seed: Number(seed),
      row: JSON.parse(readFileSync(join(dir, f), "utf8")) as ResultRow,
      budget: existsSync(budgetFile) ? (JSON.parse(readFileSync(budgetFile, "utf8")) as Budget) : undefined,
    };
  });
const samplers = order.length ? order : [...new Set(runs.map((r) => r.sampler))];
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const se = (xs: number[]) =>
  xs.length < 2 ? 0 : Math.sqrt(xs.reduce((s, x) => s + (x - mean(xs)) ** 2, 0) / (xs.length - 1) / xs.length);
const fmt = (xs: number[], digits = 3) =>
  `${mean(xs).toFixed(digits)}${xs.length > 1 ? ` ±${se(xs).toFixed(digits)}` : ""}`;
const list = (xs: (number | string)[]) => xs.join(" / ");

console.log(
  "| sampler | seeds | steps | generated rollouts | trained groups with signal | add greedy / pass@1 / pass@8 | sub greedy / pass@1 / pass@8 | wall min (load) |",
);
console.log("| --- | --- | --- | --- | --- | --- | --- | --- |");
const first = runs[0]?.row;
if (first?.before)
  console.log(
    `| the student (before) | - | - | - | - | ${["greedy", "pass1", "pass8"].map((k) => first.before!.add![k as "greedy"].toFixed(3)).join(" / ")} | ${["greedy", "pass1", "pass8"].map((k) => first.before!.sub![k as "greedy"].toFixed(3)).join(" / ")} | - |`,
  );
for (const sampler of samplers) {
  const rs = runs.filter((r) => r.sampler === sampler).sort((a, b) => a.seed - b.seed);
  if (!rs.length) continue;
  const score = (env: "add" | "sub") =>
    (["greedy", "pass1", "pass8"] as const).map((k) => fmt(rs.map((r) => r.row.after[env]![k]))).join(" / ");
  console.log(
    `| ${sampler} | ${list(rs.map((r) => r.seed))} | ${list(rs.map((r) => r.budget?.steps ?? r.row.steps ?? "?"))} | ${list(rs.map((r) => r.budget?.generated ?? "?"))} | ${list(rs.map((r) => (r.budget ? r.budget.signal_share.toFixed(2) : "?")))} | ${score("add")} | ${score("sub")} | ${list(rs.map((r) => `${(r.row.wall_s / 60).toFixed(1)} (${r.row.load.start[0]})`))} |`,
  );
}
