// A multi-agent run's curves (experiments/scripts/multi_agent.sh, docs/results.md §13): the mean of
// each named metric over every `--every` steps of metrics.jsonl (default 10), one row per window,
// then first window -> last window.
//
//   bun experiments/scripts/role_curves.ts RUN_DIR METRIC... [--every N]
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
const at = args.indexOf("--every");
const every = at >= 0 ? Number(args.splice(at, 2)[1]) : 10;
const [run, ...keys] = args;
if (!run || keys.length === 0) throw new Error("usage: role_curves.ts RUN_DIR METRIC... [--every N]");

const rows = readFileSync(`${run}/metrics.jsonl`, "utf8")
  .split("\n")
  .filter((line) => line.trim())
  .map((line) => JSON.parse(line) as Record<string, number>)
  .filter((row) => keys.some((key) => typeof row[key] === "number"));
const windows = new Map<number, Array<Record<string, number>>>();
for (const row of rows) {
  if (typeof row.step !== "number") continue;
  const w = Math.floor((row.step - 1) / every);
  if (!windows.has(w)) windows.set(w, []);
  windows.get(w)!.push(row);
}
const mean = (window: Array<Record<string, number>>, key: string) => {
  const values = window.map((row) => row[key]).filter((v): v is number => typeof v === "number");
  return values.length ? values.reduce((s, v) => s + v, 0) / values.length : NaN;
};
const short = keys.map((key) => key.split("/").slice(-2).join("/"));
console.log(`${run}: mean per ${every} steps`);
console.log(["steps", ...short].join("\t"));
const table = [...windows.entries()].sort(([a], [b]) => a - b);
for (const [w, window] of table)
  console.log([`${w * every + 1}-${(w + 1) * every}`, ...keys.map((key) => mean(window, key).toFixed(3))].join("\t"));
const first = table[0]?.[1];
const last = table.at(-1)?.[1];
if (first && last)
  console.log(["change", ...keys.map((key) => (mean(last, key) - mean(first, key)).toFixed(3))].join("\t"));
