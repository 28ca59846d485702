// docs/results.md §6's table of OPSD with a lagged self-teacher (row 6bl) is generated
// (experiments/scripts/opsd_lagged_table.ts) from reproduce.sh's rows: the committed page must equal
// what the committed rows generate, and each row carries how far the policy moved.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generatedTable, regeneratedPage } from "../../../experiments/scripts/opsd_lagged_table.ts";
import { RESULTS_DIR } from "../../../experiments/scripts/results_rows.ts";

const ROOT = join(import.meta.dir, "../../..");

test("docs/results.md's lagged-OPSD table is what the committed rows generate", () => {
  const page = readFileSync(join(ROOT, "docs/results.md"), "utf8");
  const table = generatedTable(join(ROOT, RESULTS_DIR));
  expect(table).toContain("| mean |");
  expect(table).not.toContain("| - |"); // every row has its KL and distill loss
  expect(regeneratedPage(page, table)).toBe(page);
});
