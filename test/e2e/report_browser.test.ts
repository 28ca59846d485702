// rlx report in a real browser: Debian's Chromium, headless, driven by playwright-core, kept off
// the network (--no-proxy-server and every request outside file:// refused). Two short runs (one
// with grpo, a custom ce algorithm, opsd and top-k opsd envs, so rl, ce, ref_kl and distill credit
// all appear) on one page:
// it loads without errors, every metric has a panel with data and both runs overlay in it, a
// constant metric of a long run draws, and the viewer colours each token of a sample as its audit record's weights say.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import type { AuditRecord } from "../../src/rundir/audit.ts";
import { readAudit, readMetrics, rlx, type Workspace, workspace, writeConfig } from "./train_helpers.ts";

const CHROMIUM = "/usr/bin/chromium";
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) console.warn(`report_browser.test.ts: skipped, no ${CHROMIUM} (apt install chromium)`);

/** A custom algorithm that imitates its own samples: ce weight 1 on every action token. */
const IMITATE = `export default ({ Algorithm, z }) =>
  class extends Algorithm {
    static type = "imitate";
    static actionLossType = "ce";
    static groupRelative = false;
    static schema = z.strictObject({});
  };
`;

const RUN = (seed: number, extra: string) => `max_steps = 3
seed = ${seed}
[trainer.optim]
lr = 1e-4
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 192
max_tokens = 8
[orchestrator.eval]
interval = 2
num_examples = 2
k = 2
[[orchestrator.eval.env]]
id = "math"
[[orchestrator.train.env]]
id = LETTERS
name = "letters"
${extra}`;

let ws: Workspace;
let runs: { a: string; b: string };
let browser: Browser;
let page: Page;
const errors: string[] = [];
const requests: string[] = [];

beforeAll(async () => {
  if (!hasChromium) return;
  ws = await workspace();
  const letters = JSON.stringify(ws.lettersEnv);
  const imitate = join(ws.dir, "imitate.js");
  writeFileSync(imitate, IMITATE);
  const a = writeConfig(
    ws,
    "a",
    RUN(
      0,
      `[[orchestrator.train.env]]\nid = LETTERS\nname = "imitate"\nalgo = { type = "custom", path = ${JSON.stringify(imitate)} }
[[orchestrator.train.env]]\nid = "math"\nname = "opsd"\nalgo = { type = "opsd", demo_key = "solution" }
[[orchestrator.train.env]]\nid = "math"\nname = "opsd_topk"\nalgo = { type = "opsd", demo_key = "solution", k = 4 }\n`,
    ).replaceAll("LETTERS", letters),
  );
  const b = writeConfig(ws, "b", RUN(1, "").replaceAll("LETTERS", letters));
  for (const path of [a.path, b.path]) {
    const { code, err } = await rlx(["train", path, "--inference", "in-process"]).done;
    expect(err).not.toContain("error:");
    expect(code).toBe(0);
  }
  runs = { a: a.runDir, b: b.runDir };
  const out = join(ws.dir, "report.html");
  const report = await rlx(["report", runs.a, runs.b, "--out", out]).done;
  expect(report.code).toBe(0);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--no-proxy-server", "--proxy-bypass-list=<-loopback>", "--disable-background-networking"],
  });
  page = await browser.newPage({ viewport: { width: 1300, height: 900 } });
  await page.route(/^(?!file:)/, (route) => route.abort());
  page.on("request", (request) => requests.push(request.url()));
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  await page.goto(`file://${out}`);
  await page.waitForSelector("body[data-ready=true]", { timeout: 20_000 });
}, 240_000);

afterAll(async () => {
  await browser?.close();
  if (ws) rmSync(ws.dir, { recursive: true, force: true });
});

test.skipIf(!hasChromium)("the page loads without errors; every metric has a panel with both runs' data", async () => {
  expect(errors).toEqual([]);
  expect(requests.filter((url) => !url.startsWith("file://"))).toEqual([]); // it works offline
  const panels = await page.$$eval(".panel", (els) =>
    els.map((el) => ({
      key: el.getAttribute("data-key")!,
      points: Number(el.getAttribute("data-points")),
      canvas: el.querySelector("canvas") !== null,
      legend: [...el.querySelectorAll(".u-legend .u-series")]
        .filter((row) => !(row.getAttribute("style") ?? "").includes("display: none"))
        .map((row) => row.querySelector(".u-label")?.textContent ?? ""),
    })),
  );
  expect(panels.every((p) => p.points > 0 && p.canvas)).toBe(true);
  const rowsA = readMetrics(runs.a);
  const rowsB = readMetrics(runs.b);
  const keys = new Set([...rowsA, ...rowsB].flatMap((row) => Object.keys(row)));
  keys.delete("step");
  keys.delete("time");
  const byKey = new Map(panels.map((p) => [p.key, p]));
  for (const key of keys) {
    const panel = byKey.get(key);
    expect(panel, key).toBeDefined();
    const count = [...rowsA, ...rowsB].filter((row) => key in row).length;
    expect(panel!.points, key).toBe(count);
  }
  // two runs overlay: a key both runs log has both in its legend, and a step-time panel each
  expect(byKey.get("reward/letters")!.legend).toEqual(["step", "a", "b"]);
  expect(byKey.get("eval/math/avg@2")!.legend).toEqual(["step", "a", "b"]);
  expect(panels.filter((p) => p.key.startsWith("step time")).map((p) => p.key)).toEqual([
    "step time: a",
    "step time: b",
  ]);
});

test.skipIf(!hasChromium)("a constant metric of a smoothed run draws as a flat line, in seconds", async () => {
  // 40 steps turn smoothing on; the EMA of a constant 256 is 256 give or take a rounding, a range
  // uPlot once split into ticks until the array overflowed (~30 s and a page error per panel).
  const dir = join(ws.dir, "flat");
  mkdirSync(dir);
  const rows = Array.from({ length: 40 }, (_, i) => ({ step: i + 1, "rollouts/count": 256, "rollouts/turns": 1 }));
  writeFileSync(join(dir, "metrics.jsonl"), rows.map((row) => JSON.stringify(row) + "\n").join(""));
  const out = join(ws.dir, "flat.html");
  expect((await rlx(["report", dir, "--out", out]).done).code).toBe(0);
  const flat = await browser.newPage();
  const flatErrors: string[] = [];
  flat.on("pageerror", (e) => flatErrors.push(String(e)));
  await flat.route(/^(?!file:)/, (route) => route.abort());
  await flat.goto(`file://${out}`, { timeout: 20_000 });
  await flat.waitForSelector("body[data-ready=true]", { timeout: 20_000 });
  expect(flatErrors).toEqual([]);
  const points = await flat.$eval('.panel[data-key="rollouts/count"]', (el) => el.getAttribute("data-points"));
  expect(points).toBe("40");
  await flat.close();
});

/** Each token's expected class and colour, computed from the audit record (docs: viewer.page.js). */
function expected(r: AuditRecord): Array<{ kind: string; rgb?: number[]; alpha?: number }> {
  const rl = (t: number) => (r.rl_weights ? r.rl_weights[t]! : 1);
  const isRl = (t: number) => r.loss_mask[t] === 1 && rl(t) !== 0;
  const maxAdv = Math.max(0, ...r.advantages.map((a, t) => (isRl(t) ? Math.abs(a) : 0)));
  const alpha = (x: number) => 0.15 + 0.7 * Math.min(1, Math.abs(x));
  return r.token_ids.map((_, t) => {
    const adv = r.advantages[t]!;
    if (isRl(t)) {
      if (adv === 0) return { kind: "rl0" };
      return { kind: "rl", rgb: adv > 0 ? [22, 163, 74] : [220, 38, 38], alpha: alpha(adv / maxAdv) };
    }
    const ce = r.ce_weights?.[t] ?? 0;
    if (ce !== 0) return { kind: "ce", rgb: [37, 99, 235], alpha: alpha(ce) };
    const kl = r.ref_kl_weights?.[t] ?? 0;
    if (kl !== 0) return { kind: "kl", rgb: [147, 51, 234], alpha: alpha(kl) };
    const distill = r.distill_weights?.[t] ?? 0;
    if (distill !== 0) return { kind: "distill", rgb: [234, 88, 12], alpha: alpha(distill) };
    return { kind: r.loss_mask[t] === 1 ? "zeroed" : "masked" };
  });
}

async function shownTokens(): Promise<{ rollout: string; index: number; tokens: Array<{ kind: string; bg: string }> }> {
  return page.$eval("#sample", (el) => ({
    rollout: el.getAttribute("data-rollout")!,
    index: Number(el.getAttribute("data-index")),
    tokens: [...el.querySelectorAll(".turn .tok")]
      .sort((x, y) => Number(x.getAttribute("data-t")) - Number(y.getAttribute("data-t")))
      .map((tok) => ({
        kind: ["rl", "rl0", "ce", "kl", "distill", "zeroed", "masked"].find((k) => tok.classList.contains(k))!,
        bg: /background-color: ([^;]+)/.exec(tok.getAttribute("style") ?? "")?.[1] ?? "",
      })),
  }));
}

test.skipIf(!hasChromium)(
  "the viewer colours every token as the audit record's weights say (rl, ce, ref_kl, distill)",
  async () => {
    const records = [...readAudit(runs.a).values()].flat();
    const seen = new Set<string>();
    for (const env of ["letters", "imitate", "opsd", "opsd_topk"]) {
      await page.selectOption("#viewer-run", "0");
      await page.selectOption("#viewer-env", env);
      await page.selectOption("#viewer-order", "best");
      const shown = await shownTokens();
      const record = records.find((r) => r.rollout_id === shown.rollout && r.sample_index === shown.index)!;
      expect(record.env).toBe(env);
      const want = expected(record);
      expect(shown.tokens.length).toBe(want.length);
      shown.tokens.forEach((tok, t) => {
        expect(tok.kind, `${env} token ${t}`).toBe(want[t]!.kind);
        seen.add(tok.kind);
        if (!want[t]!.rgb) return expect(tok.bg).toBe("");
        const [r, g, b, a] = tok.bg.match(/[\d.]+/g)!.map(Number);
        expect([r, g, b]).toEqual(want[t]!.rgb!);
        expect(Math.abs(a! - want[t]!.alpha!)).toBeLessThan(0.01);
      });
    }
    expect(seen).toEqual(new Set(["rl", "ce", "kl", "distill", "masked"]));
  },
);

test.skipIf(!hasChromium)(
  "the viewer's filters: best first, worst first, failed only, and the group's rewards",
  async () => {
    await page.selectOption("#viewer-env", "letters");
    const rewards = async () =>
      page.$$eval(".sample-row", (rows) => rows.map((row) => Number(/reward (\S+)$/.exec(row.textContent!)![1])));
    await page.selectOption("#viewer-order", "best");
    const best = await rewards();
    expect(best).toEqual([...best].sort((x, y) => y - x));
    await page.selectOption("#viewer-order", "worst");
    const worst = await rewards();
    expect(worst).toEqual([...best].reverse());
    await page.selectOption("#viewer-order", "failed");
    expect((await rewards()).every((r) => r <= 0)).toBe(true);
    await page.selectOption("#viewer-order", "step");
    const chips = await page.$$eval(".group .chip", (els) => els.map((el) => el.textContent));
    expect(chips.length).toBe(4);
  },
);
