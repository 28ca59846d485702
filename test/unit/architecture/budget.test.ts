// The size budget of docs/architecture.md ("Layout and layering"): a source file has one job, so
// none in src/ or native/ passes 400 lines, one algorithm's file in src/algorithms/ stays under
// 200 (its class, schema, traits and the math in its header), and the step loop a reader starts
// from (src/orchestrator/loop.ts) under 300. A file that outgrows its budget is cut by concern,
// not trimmed to fit.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const ROOT = join(import.meta.dir, "../../..");
const SOURCE = /\.(ts|js|cpp|h|cu|css)$/;

function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: "utf8" })
    .filter((f) => SOURCE.test(f) && !f.startsWith("build/"))
    .map((f) => join(dir, f));
}

const lines = (file: string) => readFileSync(join(ROOT, file), "utf8").split("\n").length - 1;

/** The files over `limit` lines, as "path: N lines". */
const over = (paths: string[], limit: number) =>
  paths.filter((f) => lines(f) > limit).map((f) => `${relative(ROOT, join(ROOT, f))}: ${lines(f)} lines`);

test("no source file in src/ or native/ over 400 lines", () => {
  const all = [...files("src"), ...files("native")];
  expect(all.length).toBeGreaterThan(200); // the walk sees the sources
  expect(over(all, 400)).toEqual([]);
});

test("a file of src/algorithms/ at most 200 lines, loop.ts at most 300", () => {
  expect(over(files("src/algorithms"), 200)).toEqual([]);
  expect(over(["src/orchestrator/loop.ts"], 300)).toEqual([]);
});
