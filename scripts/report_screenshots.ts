// The report screenshots of docs/report.md and the README: renders `rlx report` of the given runs
// and photographs it in headless Chromium (Debian's, via playwright-core; nothing fetched): the
// top of the page, and the rollout viewer on the best sample of one env.
//
//   bun scripts/report_screenshots.ts --out docs/images --viewer-env forth RUN_DIR [RUN_DIR ...]
//
// writes OUT/report_quickstart.png and OUT/report_viewer_<env>.png (PNG, 1200 px wide).
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { chromium } from "playwright-core";
import { renderReport } from "../src/report/html.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { out: { type: "string", default: "docs/images" }, "viewer-env": { type: "string", default: "forth" } },
});
if (positionals.length === 0) throw new Error("give one or more run directories");
mkdirSync(values.out!, { recursive: true });
const html = join(values.out!, ".report.tmp.html");
await Bun.write(html, renderReport(positionals));

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--no-sandbox", "--no-proxy-server"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 860 } });
  await page.route(/^(?!file:)/, (route) => route.abort());
  await page.goto(`file://${resolve(html)}`);
  await page.waitForSelector("body[data-ready=true]");
  // smoothing on, to show the EMA over the faint raw line
  await page.$eval("#smoothing", (el) => {
    (el as unknown as { value: string }).value = "0.6";
    el.dispatchEvent(new Event("input"));
  });
  await page.screenshot({ path: join(values.out!, "report_quickstart.png") });
  const env = values["viewer-env"]!;
  await page.selectOption("#viewer-env", env);
  await page.selectOption("#viewer-order", "best");
  await page.locator("#viewer").screenshot({ path: join(values.out!, `report_viewer_${env}.png`) });
} finally {
  await browser.close();
  await Bun.file(html).delete();
}
