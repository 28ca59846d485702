// The results of experiments/scripts/reproduce.sh as data: one JSON file per row and seed under
// experiments/results/reproduce/<set>/ (row.ts writes them), a set being one run of the command on one
// machine. Loading, grouping a row's seeds, and the statistics the table and the agreement check
// print: the mean over seeds and its standard error (sample standard deviation / sqrt(seeds)).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { RlLoss } from "../../src/data/loss_types.ts";

/** eval-200 of one env: greedy pass@1, and pass@1 / pass@8 from 8 samples at temperature 1. */
export interface Scores {
  greedy: number;
  pass1: number;
  pass8: number;
}

/** The held-out nll of an env's observations (obs_loss.ts): all their content tokens, and the digits alone. */
export interface ObsScore {
  nll: number;
  digitNll: number;
  tokens: number;
}

export interface ResultRow {
  /** The row of docs/results.md's table, e.g. "2" or "1a". */
  row: string;
  experiment: string;
  algorithm: string;
  seed: number;
  /** Per env name; absent for a model trained from scratch. */
  before?: Record<string, Scores>;
  after: Record<string, Scores>;
  /** For a model stopped by an SFT stop band: src/sft/band.ts's record. */
  band?: {
    metric: string;
    min: number;
    max?: number;
    value: number;
    step: number;
  };
  steps?: number;
  /** The --set values over the run's config file (objectives.sh's rows). */
  config?: string[];
  /** The rl loss the trainer ran with, every setting (objectives.sh's rows; run_metrics.ts). */
  loss?: RlLoss;
  /** Per-step trainer metrics: `step` and each of run_metrics.ts's CURVE_KEYS (objectives.sh's rows). */
  curves?: Record<string, Array<number | null>>;
  /** The held-out nll of the env's tool outputs before and after (echo_calc.sh's rows). */
  obs?: { before?: ObsScore; after: ObsScore };
  /** Per-token KL(after || start) over held-out gold replies (policy_kl.ts). */
  kl_to_start?: number;
  wall_s: number;
  /** 1, 5 and 15-minute load averages at the start and the end. */
  load: { start: number[]; end: number[] };
  cpu: string;
  cores: number;
  commit: string;
  date: string;
  command: string;
}

/** One row of one set: its seeds' results. */
export interface RowGroup {
  set: string;
  row: string;
  results: ResultRow[];
}

export const RESULTS_DIR = "experiments/results/reproduce";

/** Every set's rows, grouped by row, in each set's order of first appearance (the order reproduce.sh ran them). */
export function loadGroups(dir = RESULTS_DIR): RowGroup[] {
  const groups: RowGroup[] = [];
  for (const set of readdirSync(dir).sort()) {
    const rows = readdirSync(join(dir, set))
      .filter((f) => f.endsWith(".json"))
      .map((f) => JSON.parse(readFileSync(join(dir, set, f), "utf8")) as ResultRow)
      .sort((a, b) => a.date.localeCompare(b.date));
    for (const result of rows) {
      const group = groups.find((g) => g.set === set && g.row === result.row);
      if (group) group.results.push(result);
      else groups.push({ set, row: result.row, results: [result] });
    }
  }
  for (const g of groups) g.results.sort((a, b) => a.seed - b.seed);
  return groups;
}

export const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Standard error of the mean over seeds; 0 for one seed (no spread is known). */
export function standardError(xs: number[]): number {
  if (xs.length < 2) return 0;
  const m = mean(xs);
  const variance = xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1);
  return Math.sqrt(variance / xs.length);
}

/** "mean ±se" over seeds, with `digits` decimals. */
/** A figure to three decimals, as the results tables print them. */
export const f3 = (x: number) => x.toFixed(3);
export const meanSe = (xs: number[], digits = 3) => `${mean(xs).toFixed(digits)} ±${standardError(xs).toFixed(digits)}`;

/** The envs a row scores, in the order of its first result. */
export const envsOf = (group: RowGroup) => Object.keys(group.results[0]!.after);
