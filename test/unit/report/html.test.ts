// rlx report: metric families become charts with one line per key; the page is self-contained;
// a corrupt metrics line is an error naming the file and line.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { families, renderReport } from "../../../src/report/html.ts";

function run(lines: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), "rlx-report-"));
  writeFileSync(join(dir, "metrics.jsonl"), lines.join("\n") + "\n");
  return dir;
}

test("keys group into families by prefix, reward first", () => {
  const rows = [
    { step: 1, "reward/math": 0.1, "reward/forth": 0.0, "loss/rl": 0.5, entropy: 2.0, note: "x" },
    { step: 2, "reward/math": 0.3, "reward/forth": 0.1, "loss/rl": 0.4, entropy: 1.9 },
  ];
  const fam = families(rows);
  expect([...fam.keys()]).toEqual(["reward", "loss", "entropy"]);
  expect(fam.get("reward")!.map((s) => s.name)).toEqual(["reward/math", "reward/forth"]);
  expect(fam.get("reward")![0]!.points).toEqual([
    [1, 0.1],
    [2, 0.3],
  ]);
});

test("the page is self-contained: inline SVG, no scripts, no external URLs", () => {
  const html = renderReport(run(['{"step":1,"reward/math":0.2}', '{"step":2,"reward/math":0.6}']));
  expect(html).toContain("<svg");
  expect(html).toContain("reward/math");
  expect(html).not.toContain("<script");
  expect(html).not.toMatch(/(src|href)="http/);
});

test("a corrupt line names the file and line", () => {
  const dir = run(['{"step":1,"reward/math":0.2}', '{"step":2,"rew']);
  expect(() => renderReport(dir)).toThrow(`${join(dir, "metrics.jsonl")}:2: not a JSON object`);
});
