// docs/scaling.md's "Memory planner" tables are experiments/scripts/plan_table.ts's output: the
// planned GPU table from the planner, the CPU table from the committed measured row. A change to
// either that is not regenerated into the docs fails here.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "../../..");

test("docs/scaling.md carries plan_table.ts's tables as they are generated now", () => {
  const run = Bun.spawnSync([process.execPath, join(ROOT, "experiments/scripts/plan_table.ts")], { cwd: ROOT });
  expect(run.exitCode).toBe(0);
  const rows = run.stdout
    .toString()
    .split("\n")
    .filter((line) => line.startsWith("|"));
  expect(rows.length).toBeGreaterThan(10);
  const docs = readFileSync(join(ROOT, "docs/scaling.md"), "utf8").split("\n");
  expect(rows.filter((row) => !docs.includes(row))).toEqual([]);
});
