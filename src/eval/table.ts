// Plain-text tables of eval results: one row per env for `rlx eval`, and a before/after table for
// the end of `rlx sft` (and of any run that evaluates at its first and last step). Columns are the
// metrics worth reading at a glance; everything else is in the JSON.
import type { EnvEval } from "./evaluate.ts";

const NUMERIC = /^[-+]?[\d,.]+(e[-+]?\d+)?s?$|^-$/;

/** Two spaces between columns; a column of numbers is right-aligned, any other left-aligned. */
export function formatTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? "").length)));
  const right = header.map((_, c) => c > 0 && rows.length > 0 && rows.every((r) => NUMERIC.test(r[c] ?? "")));
  const line = (cells: string[]) =>
    cells
      .map((cell, c) => (right[c] ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)))
      .join("  ")
      .trimEnd();
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

const num = (v: number | undefined) => (v === undefined ? "-" : v.toFixed(3));

/** The metric keys shown for a result, in order: avg@k, pass@j..., greedy/pass@1. */
export function headlineKeys(result: EnvEval): string[] {
  const passes = Object.keys(result.metrics).filter((k) => /^pass@\d+$/.test(k));
  return [`avg@${result.k}`, ...passes, ...("greedy/pass@1" in result.metrics ? ["greedy/pass@1"] : [])];
}

/** One row per env: tasks, k, avg@k, pass@1, pass@k, greedy pass@1, error rate, time. */
export function evalTable(results: readonly EnvEval[]): string {
  const rows = results.map((r) => {
    const hasGreedy = "greedy/pass@1" in r.metrics;
    return [
      r.env,
      String(r.tasks),
      String(r.k),
      num(r.metrics[`avg@${r.k}`]),
      num(r.metrics["pass@1"]),
      num(r.metrics[`pass@${r.k}`]),
      hasGreedy ? num(r.metrics["greedy/pass@1"]) : "-",
      num(r.metrics.error_rate),
      `${r.seconds.toFixed(1)}s`,
    ];
  });
  return formatTable(["env", "tasks", "k", "avg@k", "pass@1", "pass@k", "greedy@1", "errors", "time"], rows);
}

/** Before/after per env and headline metric. */
export function compareTable(before: readonly EnvEval[], after: readonly EnvEval[]): string {
  const rows: string[][] = [];
  for (const end of after) {
    const start = before.find((b) => b.env === end.env);
    for (const key of headlineKeys(end))
      rows.push([`${end.env} ${key}`, num(start?.metrics[key]), num(end.metrics[key])]);
  }
  return formatTable(["eval", "before", "after"], rows);
}
