// docs/algorithms.md's "Which objective" table is generated (experiments/scripts/objectives_table.ts)
// from the JSON rows under experiments/results/objectives/: the committed page must equal what the
// committed rows generate, and each row must have run its objective's --set values
// (experiments/scripts/objectives.ts). The columns are checked on rows made up here.
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { OBJECTIVES } from "../../../experiments/scripts/objectives.ts";
import { generatedTable, regeneratedPage, ROWS_DIR } from "../../../experiments/scripts/objectives_table.ts";
import { loadGroups, type ResultRow, type RowGroup } from "../../../experiments/scripts/results_rows.ts";

const ROOT = join(import.meta.dir, "../../..");
const committed = () => (existsSync(join(ROOT, ROWS_DIR)) ? loadGroups(join(ROOT, ROWS_DIR)) : []);

test("docs/algorithms.md's objectives table is what the committed rows generate", () => {
  const page = readFileSync(join(ROOT, "docs/algorithms.md"), "utf8");
  expect(regeneratedPage(page, generatedTable(committed()))).toBe(page);
});

test("every committed row is one of objectives.ts's objectives, run with its --set values", () => {
  for (const group of committed()) {
    const objective = OBJECTIVES.find((o) => o.name === group.row);
    expect(objective?.name).toBe(group.row);
    for (const r of group.results) {
      expect(r.config ?? []).toEqual(objective!.delta);
      expect(r.algorithm).toBe(objective!.algorithm);
      expect(r.loss?.type).toBe(objective!.loss);
    }
  }
});

function group(row: string, entropy_S: number[][]): RowGroup {
  const results = entropy_S.map((entropy, seed): ResultRow => ({
    row,
    experiment: row,
    algorithm: "grpo",
    seed,
    before: { math: { greedy: 0.4, pass1: 0.3, pass8: 0.7 } },
    after: { math: { greedy: 0.5 + seed / 10, pass1: 0.4, pass8: 0.8 } },
    curves: {
      step: entropy.map((_, i) => i + 1),
      entropy,
      "clipped/low": entropy.map(() => 0.01),
      "clipped/high": entropy.map(() => 0.02 * (seed + 1)),
      "masked/low": entropy.map(() => 0),
      "masked/high": entropy.map(() => 0),
    },
    wall_s: 120,
    load: { start: [1, 1, 1], end: [2, 1, 1] },
    cpu: "Test CPU",
    cores: 2,
    commit: "abc1234",
    date: "2026-12-01T00:00:00Z",
    command: "rlx train",
  }));
  return { set: "t", row, results };
}

test("a measured objective's line: scores, entropy at steps 1 / 20 / 40, clipped and masked means; the others not measured", () => {
  const curve = (start: number) => Array.from({ length: 40 }, (_, i) => start - i / 100);
  const table = generatedTable([group("cispo", [curve(1), curve(0.8)])]);
  const line = table.split("\n").find((l) => l.startsWith("| `cispo` |"))!;
  // entropy: step 1 (1 + 0.8) / 2, step 20 (0.81 + 0.61) / 2, step 40 (0.61 + 0.41) / 2; clipped high (0.02 + 0.04) / 2
  expect(line).toContain(
    "| 0, 1 | 0.400 / 0.300 / 0.700 | **0.550 ±0.050 / 0.400 / 0.800** | 0.900 / 0.710 / 0.510 | 0.010 / 0.030 | 0.000 / 0.000 | 2.0 min (1.0-2.0) | Test CPU, 2 cores; abc1234; set t |",
  );
  expect(line).toContain("`trainer.loss.type=cispo`; clip 1 / 0.28");
  const others = table.split("\n").filter((l) => l.includes("| not measured |"));
  expect(others).toHaveLength(OBJECTIVES.length - 1);
});
