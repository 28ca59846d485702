// Per-step curves of result rows (row.ts --run --curves) read in windows, for the generated tables
// of runs whose story is a curve (docs/results.md §13): the mean of a curve over steps a..b, its
// value at one step, and a table of windows by columns, each cell one value per seed.
import { f3, mean, type ResultRow, type RowGroup } from "./results_rows.ts";

/** The mean of a row's curve `key` over steps first..last (nulls skipped). */
export function windowMean(row: ResultRow, key: string, first: number, last: number): number {
  const steps = row.curves!.step!;
  const values = row.curves![key]!.filter((v, i) => v !== null && steps[i]! >= first && steps[i]! <= last);
  return mean(values as number[]);
}

/** A row's curve `key` at `step` (eval lines come every few steps). */
export function at(row: ResultRow, key: string, step: number): number | undefined {
  const i = row.curves!.step!.indexOf(step);
  return i < 0 ? undefined : (row.curves![key]![i] ?? undefined);
}

/** 10-step windows 1-10 .. (steps-9)-steps. */
export const windows = (steps: number) =>
  Array.from({ length: steps / 10 }, (_, i) => [10 * i + 1, 10 * i + 10] as const);

/** A column of a window table: a row group's curve under a name. */
export interface WindowColumn {
  group: RowGroup;
  key: string;
  name: string;
}

const seeds = (g: RowGroup) => g.results.map((r) => `s${r.seed}`).join(" / ");

/** Markdown lines: per 10-step window, each column's window mean per seed ("s0 / s1"). */
export function windowTable(columns: WindowColumn[], steps: number): string[] {
  return [
    `| steps | ${columns.map((c) => `${c.name} ${seeds(c.group)}`).join(" | ")} |`,
    `| --- | ${columns.map(() => "---").join(" | ")} |`,
    ...windows(steps).map(
      ([a, b]) =>
        `| ${a}-${b} | ${columns.map((c) => c.group.results.map((r) => f3(windowMean(r, c.key, a, b))).join(" / ")).join(" | ")} |`,
    ),
  ];
}
