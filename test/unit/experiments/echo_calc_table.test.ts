// docs/results.md §7's ECHO table is generated (experiments/scripts/echo_calc_table.ts) from
// experiments/scripts/echo_calc.sh's JSON rows under experiments/results/echo_calc/: the committed
// page must equal what the committed rows generate, and every arm of the comparison is in it.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generatedTable, regeneratedPage, ROWS_DIR } from "../../../experiments/scripts/echo_calc_table.ts";

const ROOT = join(import.meta.dir, "../../..");

test("docs/results.md's ECHO table is what the committed rows generate", () => {
  const page = readFileSync(join(ROOT, "docs/results.md"), "utf8");
  const table = generatedTable(join(ROOT, ROWS_DIR));
  for (const arm of [
    "| the calc student",
    "| GRPO |",
    "| GRPO + ECHO, alpha 0.1 |",
    "| GRPO + ECHO, alpha 1 |",
    "| alpha 0.1 |",
    "| steps 1-10 -> 51-60, mean over seeds | train reward | entropy | gradient norm |",
  ])
    expect(table).toContain(arm);
  expect(regeneratedPage(page, table)).toBe(page);
});
