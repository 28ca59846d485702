// docs/results.md §14's table of the judges on forth is generated (experiments/scripts/
// judge_forth_table.ts) from judge_forth.sh's rows: the committed page must equal what the
// committed rows generate.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generatedTable, regeneratedPage, ROWS_DIR } from "../../../experiments/scripts/judge_forth_table.ts";

const ROOT = join(import.meta.dir, "../../..");

test("docs/results.md's forth-judge table is what the committed rows generate", () => {
  const page = readFileSync(join(ROOT, "docs/results.md"), "utf8");
  const table = generatedTable(join(ROOT, ROWS_DIR));
  expect(table.split("\n").filter((l) => /^\| J[123], /.test(l)).length).toBe(3);
  expect(regeneratedPage(page, table)).toBe(page);
});
