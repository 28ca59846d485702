// Shared by the benchmarks: runs a PyTorch reference script with Debian's python (torch 1.13 on
// the same libtorch and BLAS as the shim) and parses its one JSON line; small table and stats helpers.
import { join } from "node:path";
import type { TrainingSample } from "../src/data/types.ts";

/** Debian's python: the `python3` first on PATH may be one without torch. */
export const PYTHON = process.env.RLX_BENCH_PYTHON ?? "/usr/bin/python3";

/** Runs bench/reference/<script> with args; throws with its stderr when it fails. */
export function runReference<T>(script: string, args: string[]): T {
  const path = join(import.meta.dir, "reference", script);
  const proc = Bun.spawnSync([PYTHON, path, ...args], { stdout: "pipe", stderr: "pipe" });
  if (proc.exitCode !== 0) {
    throw new Error(
      `${PYTHON} ${script} failed (exit ${proc.exitCode}):\n${proc.stderr.toString()}\nset RLX_BENCH_PYTHON to a python with torch`,
    );
  }
  const lines = proc.stdout.toString().trim().split("\n");
  return JSON.parse(lines[lines.length - 1]!) as T;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Prints rows as an aligned plain-text table (first row is the header). */
export function printTable(rows: (string | number)[][]): void {
  const cells = rows.map((r) => r.map(String));
  const widths = cells[0]!.map((_, c) => Math.max(...cells.map((r) => r[c]!.length)));
  const line = (r: string[]) =>
    r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join("  ");
  console.log(line(cells[0]!));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const r of cells.slice(1)) console.log(line(r));
}

/** The memory benches' rl sample of n tokens: the first half prompt, the second half actions. */
export function halfActionSample(id: number, n: number, vocab: number): TrainingSample {
  const lossMask = Array.from({ length: n }, (_, t) => (t >= n / 2 ? 1 : 0));
  return {
    tokenIds: Array.from({ length: n }, (_, t) => 3 + ((t * 7919 + id * 104729) % (vocab - 3))),
    lossMask,
    advantages: lossMask.map((m, t) => (m ? (t % 2 ? 1 : -1) : 0)),
    inferenceLogprobs: lossMask.map((m) => (m ? -12 : 0)),
    temperatures: lossMask.map(() => 1),
    env: "bench",
    rolloutId: `r${id}`,
  };
}

/** Each spawned process's stdout, stderr and exit code, once every one has exited. */
export function outputsOf(procs: readonly Bun.Subprocess<"ignore" | "inherit" | "pipe", "pipe", "pipe">[]) {
  return Promise.all(
    procs.map(async (p) => {
      const [out, err, code] = await Promise.all([
        new Response(p.stdout).text(),
        new Response(p.stderr).text(),
        p.exited,
      ]);
      return { out, err, code };
    }),
  );
}

/** Value of `--name X` in argv, or the fallback. */
export function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : fallback;
}
