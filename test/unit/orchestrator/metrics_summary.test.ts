// The end-of-run summary of `rlx train`: reward per env averaged over the first and the last few
// logged steps (an env absent from a step does not count as 0 there), rollout and error totals,
// the held-out evals at the first and last eval (the step-0 note included) and their change, and the step's timing.
import { expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { evalSummary, MetricsLog } from "../../../src/orchestrator/metrics/log.ts";
import type { PublishedStep } from "../../../src/rundir/paths.ts";

const published = (step: number, orchestrator: Record<string, number>): PublishedStep => ({
  step,
  orchestrator,
  metrics: {},
  perEnv: {},
  timing: { wait: 0, train: 0, publish: 0, checkpoint: 0 },
});

test("summary: means of the first and last three steps per env, totals, and eval before/after", () => {
  const log = new MetricsLog(mkdtempSync(join(tmpdir(), "rlx-summary-")), ["math", "search"], 8, () => {});
  log.note(0, { "eval/math/pass@1": 0.25, "eval/math/avg@4": 0.2, "time/eval": 1 });
  const math = [0.1, 0.2, 0.3, 0.5, 0.5, 0.6, 0.7, 0.8];
  math.forEach((reward, i) => {
    const search: Record<string, number> =
      i === 1 ? {} : { "reward/search": i / 10, "rollouts/search": 8, "errors/search": i === 7 ? 2 : 0 };
    const evals: Record<string, number> = i === 7 ? { "eval/math/pass@1": 0.75, "eval/math/avg@4": 0.5 } : {};
    log.publish(i + 1, published(i + 1, { "reward/math": reward, "rollouts/math": 8, ...search }), evals);
  });
  const lines = log.summary().split("\n");
  expect(lines[0]).toMatch(/^env +reward, steps 1-3 +reward, steps 6-8 +rollouts +errors$/);
  expect(lines[2]!.split(/ +/)).toEqual(["math", "0.200", "0.700", "64", "0"]);
  expect(lines[3]!.split(/ +/)).toEqual(["search", "0.100", "0.600", "56", "2"]); // (0 + 0.2) / 2: step 2 had none
  expect(lines[5]).toMatch(/^held-out eval +step 0 +step 8 +change$/);
  expect(lines.slice(7, 9).map((l) => l.split(/ +/))).toEqual([
    ["math/pass@1", "0.250", "0.750", "+0.500"],
    ["math/avg@4", "0.200", "0.500", "+0.300"],
  ]);
  expect(lines[10]).toMatch(/^time per step, mean of 8: \d+\.\d\d s \| rollouts 0\.00 s/);
});

test("summary: a two-step run compares step 1 with step 2 and has no eval table without two evals", () => {
  const log = new MetricsLog(mkdtempSync(join(tmpdir(), "rlx-summary-")), ["math"], 2, () => {});
  log.publish(1, published(1, { "reward/math": 0.25, "rollouts/math": 4 }));
  log.publish(2, published(2, { "reward/math": 0.5, "rollouts/math": 4 }));
  const lines = log.summary().split("\n");
  expect(lines.slice(0, 3)).toEqual([
    "env   reward, step 1  reward, step 2  rollouts  errors",
    "----  --------------  --------------  --------  ------",
    "math           0.250           0.500         8       0",
  ]);
  expect(lines.slice(3, 4)).toEqual([""]);
  expect(lines[4]).toMatch(/^time per step, mean of 2: /);
});

test("an eval line says how many of an env's rollouts errored, when any did", () => {
  expect(evalSummary({ "eval/math/avg@1": 0, "eval/math/pass@1": 0, "eval/math/error_rate": 1 })).toBe(
    "eval math avg@1 0.000 pass@1 0.000 errored 100%",
  );
  expect(evalSummary({ "eval/math/avg@4": 0.5, "eval/math/error_rate": 0 })).toBe("eval math avg@4 0.500");
});

test("an eval line shows the greedy score when the eval takes a greedy sample", () => {
  expect(evalSummary({ "eval/rev/avg@8": 0.25, "eval/rev/pass@1": 0.25, "eval/rev/greedy/pass@1": 0.375 })).toBe(
    "eval rev avg@8 0.250 pass@1 0.250 greedy 0.375",
  );
});
