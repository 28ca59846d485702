// rlx report's page: self-contained (uPlot and the page's scripts inlined, no URL it would fetch),
// the runs' data embedded safely (a `</script>` in a metric name cannot end the script), several
// runs named apart, and a corrupt metrics line an error naming the file and line. What the page
// draws is tested in a browser (test/e2e/report_browser.test.ts).
import { expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readRuns, renderReport } from "../../../src/report/html.ts";

function run(lines: string[], name = "run"): string {
  const dir = join(mkdtempSync(join(tmpdir(), "rlx-report-")), name);
  mkdirSync(dir);
  writeFileSync(join(dir, "metrics.jsonl"), lines.join("\n") + "\n");
  return dir;
}

test("the page is self-contained: uPlot and the scripts inline, nothing fetched", () => {
  const html = renderReport([run(['{"step":1,"reward/math":0.2}', '{"step":2,"reward/math":0.6}'])]);
  expect(html).toContain("uPlot");
  expect(html).toContain('"reward/math":0.6');
  expect(html).not.toMatch(/<(script|link|img)[^>]+(src|href)=/);
  expect(html).not.toMatch(/(src|href)="?https?:/);
});

test("a metric name holding </script> stays inside the data", () => {
  const html = renderReport([run(['{"step":1,"x/</script><b>":1}'])]);
  expect(html).not.toContain("</script><b>");
  expect(html).toContain("x/\\u003c/script>\\u003cb>");
});

test("rows keep their finite numbers; runs with the same folder name are told apart by their parent", () => {
  const [a, b] = readRuns([
    run(['{"step":1,"reward/math":0.2,"note":"text","bad":null}'], "same"),
    run(['{"step":1,"reward/math":0.4}'], "same"),
  ]);
  expect(a!.rows).toEqual([{ step: 1, "reward/math": 0.2 }]);
  expect(a!.name).not.toBe(b!.name);
  expect(a!.name.endsWith("/same")).toBe(true);
  expect(a!.samples).toEqual([]);
});

test("a corrupt line names the file and line", () => {
  const dir = run(['{"step":1,"reward/math":0.2}', '{"step":2,"rew']);
  expect(() => renderReport([dir])).toThrow(`${join(dir, "metrics.jsonl")}:2: not a JSON object`);
});
