// docs/results.md §13's tables of proposer-solver through spawned groups are generated
// (experiments/scripts/proposer_table.ts) from proposer_spawn.sh's rows: the committed page must
// equal what the committed rows generate.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generatedTable, regeneratedPage, ROWS_DIR } from "../../../experiments/scripts/proposer_table.ts";

const ROOT = join(import.meta.dir, "../../..");

test("docs/results.md's proposer-spawn tables are what the committed rows generate", () => {
  const page = readFileSync(join(ROOT, "docs/results.md"), "utf8");
  const table = generatedTable(join(ROOT, ROWS_DIR));
  expect(table.split("\n").filter((l) => /^\| P[012]f?, /.test(l)).length).toBe(6);
  expect(table.split("\n").filter((l) => /^\| \d+-\d+ \|/.test(l)).length).toBe(10);
  expect(regeneratedPage(page, table)).toBe(page);
});
