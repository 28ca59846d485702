// docs/results.md's reproduced table is generated (experiments/scripts/results_table.ts) from the
// JSON rows under experiments/results/reproduce/: the committed page must equal what the committed rows
// generate, so no number in it can be typed by hand. The statistics it prints are checked on rows
// made up here: the standard error of a mean over seeds and the agreement verdicts.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generatedTable, regeneratedPage } from "../../../experiments/scripts/results_table.ts";
import { loadGroups, type ResultRow, type RowGroup, standardError } from "../../../experiments/scripts/results_rows.ts";

const ROOT = join(import.meta.dir, "../../..");

test("docs/results.md's generated table is what the committed rows generate", () => {
  const page = readFileSync(join(ROOT, "docs/results.md"), "utf8");
  const groups = loadGroups(join(ROOT, "experiments/results/reproduce"));
  expect(groups.length).toBeGreaterThan(0);
  expect(regeneratedPage(page, generatedTable(groups))).toBe(page);
});

test("standard error over seeds: sample sd / sqrt(n), 0 for a single seed", () => {
  expect(standardError([0.5])).toBe(0);
  expect(standardError([0.4, 0.6])).toBeCloseTo(0.1, 12); // sd = 0.1414, / sqrt(2)
  expect(standardError([0.1, 0.2, 0.6])).toBeCloseTo(Math.sqrt((0.2 ** 2 + 0.1 ** 2 + 0.3 ** 2) / 2 / 3), 12);
});

function group(set: string, greedy_S: number[]): RowGroup {
  const results = greedy_S.map((greedy, seed): ResultRow => ({
    row: "2",
    experiment: "GRPO",
    algorithm: "grpo",
    seed,
    after: { math: { greedy, pass1: greedy / 2, pass8: 0.9 } },
    wall_s: 240,
    load: { start: [1, 1, 1], end: [2, 1, 1] },
    cpu: "Test CPU",
    cores: 2,
    commit: "abc1234",
    date: "2026-12-01T00:00:00Z",
    command: "rlx train",
  }));
  return { set, row: "2", results };
}

test("agreement: a later set within 2 s.e. of the difference says yes, beyond it says no", () => {
  // a: 0.62 ±0.02; b: 0.67 ±0.01, a difference of 0.05 > 2 sqrt(0.02² + 0.01²) = 0.045; c: 0.64 ±0.02, 0.02 < 0.057.
  const table = generatedTable([group("a", [0.6, 0.64]), group("b", [0.66, 0.68]), group("c", [0.62, 0.66])]);
  const lines = table.split("\n").filter((l) => l.startsWith("| 2 |  |"));
  expect(lines).toHaveLength(2);
  expect(lines[0]).toContain("| 0.620 ±0.020 (a) | 0.670 ±0.010 (b) | +0.050 | 0.045 | no | **no** |");
  expect(lines[1]).toContain("| 0.620 ±0.020 (a) | 0.640 ±0.020 (c) | +0.020 | 0.057 | yes | yes |");
  expect(table).toContain(
    "| 2 | GRPO | grpo | 0, 1 | - | **0.620 ±0.020 / 0.310 / 0.900** | 4.0 min (1.0-2.0) | Test CPU, 2 cores; abc1234; set a |",
  );
});
