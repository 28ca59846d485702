// docs/results.md §9's table of the distillation rows is generated (experiments/scripts/distill_table.ts)
// from reproduce.sh's rows: the committed page must equal what the committed rows generate, and
// every OPD row against a teacher reports the share of the gap it closed.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generatedTable, regeneratedPage } from "../../../experiments/scripts/distill_table.ts";
import { RESULTS_DIR } from "../../../experiments/scripts/results_rows.ts";

const ROOT = join(import.meta.dir, "../../..");

test("docs/results.md's distillation table is what the committed rows generate", () => {
  const page = readFileSync(join(ROOT, "docs/results.md"), "utf8");
  const table = generatedTable(join(ROOT, RESULTS_DIR));
  const opd = table.split("\n").filter((l) => /^\| epyc-\d \| (4|4k|8b[a-z]*) \|/.test(l));
  expect(opd.length).toBeGreaterThan(0);
  for (const line of opd) expect(line).toMatch(/ -?\d+ % \|/);
  expect(regeneratedPage(page, table)).toBe(page);
});
