// docs/scaling.md's long-context tables are generated (experiments/scripts/long_context_table.ts)
// from bench/long_context.ts's and bench/long_serve.ts's JSON rows and the needle evals under
// experiments/results/long_context/: the committed page must equal what the committed rows generate.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  generatedNeedleTable,
  generatedServeTable,
  generatedTable,
  regeneratedPage,
  ROWS_DIR,
} from "../../../experiments/scripts/long_context_table.ts";

const ROOT = join(import.meta.dir, "../../..");

test("docs/scaling.md's long-context tables are what the committed rows generate", () => {
  const page = readFileSync(join(ROOT, "docs/scaling.md"), "utf8");
  const table = generatedTable(join(ROOT, ROWS_DIR));
  const serveTable = generatedServeTable(join(ROOT, ROWS_DIR));
  const needleTable = generatedNeedleTable(join(ROOT, ROWS_DIR, "xeon-1"));
  expect(table).toContain("| 32,768 | 2 | none | 0.98 | 0.56 |");
  expect(serveTable).toContain("| paged budget |");
  expect(needleTable).toContain("| phase 3, trained on prompts up to 8k tokens | 0.90 | 0.70 |");
  expect(needleTable).toContain("| phase 3, the warm start | 0.750 | 0.731 | 0.875 |");
  expect(needleTable).toContain("| four groups a step: seed 1 after 30 steps | 0.925 | 0.831 | 0.950 |");
  expect(regeneratedPage(page, table, serveTable, needleTable)).toBe(page);
});
