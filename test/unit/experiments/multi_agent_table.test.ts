// docs/results.md §13's tables of the in-episode proposer-solver and Nim self-play runs are
// generated (experiments/scripts/multi_agent_table.ts) from multi_agent.sh's rows: the committed
// page must equal what the committed rows generate.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  nimTables,
  proposerTables,
  regeneratedPage,
  ROWS_DIR,
} from "../../../experiments/scripts/multi_agent_table.ts";

const ROOT = join(import.meta.dir, "../../..");

test("docs/results.md's multi-agent tables are what the committed rows generate", () => {
  const page = readFileSync(join(ROOT, "docs/results.md"), "utf8");
  const proposer = proposerTables(join(ROOT, ROWS_DIR));
  const nim = nimTables(join(ROOT, ROWS_DIR));
  for (const table of [proposer, nim]) expect(table.split("\n").filter((l) => /^\| \d+-\d+ \|/.test(l)).length).toBe(6);
  expect(proposer.split("\n").filter((l) => /^\| M-p2?, /.test(l)).length).toBe(2);
  expect(nim.split("\n").filter((l) => /^\| M-n, /.test(l)).length).toBe(1);
  expect(regeneratedPage(page, proposer, nim)).toBe(page);
});
