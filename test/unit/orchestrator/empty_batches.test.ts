// A batch with nothing to train (every group's rewards equal, so every advantage is 0) is sampled
// again, and orchestrator.max_empty_batches of them in a row stop the run with the reason and the
// key to raise. The real rollout driver, env and GRPO run against a scripted client.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { collectStep } from "../../../src/orchestrator/collect.ts";
import { FailureWindow } from "../../../src/orchestrator/failures.ts";
import { Progress } from "../../../src/orchestrator/metrics/log.ts";
import { LETTERS_ENV } from "../../e2e/train_helpers.ts";
import { harness, Scripted } from "./collect_harness.ts";

const envFile = join(mkdtempSync(join(tmpdir(), "rlx-empty-")), "letters.ts");
writeFileSync(envFile, LETTERS_ENV);

/** Every reply scores 1 ("abc") for the first `solved` calls, then "ab1" and "xyz" alternate (rewards differ). */
async function collect(solved: number, maxEmptyBatches: number) {
  const client = new Scripted((call) => (call < solved ? "abc" : call % 2 ? "ab1" : "xyz"));
  const { o, sampler } = await harness({
    envFile,
    client,
    orchestrator: `batch_size = 4\ngroup_size = 2\nmax_empty_batches = ${maxEmptyBatches}`,
  });
  const warnings: string[] = [];
  o.warn = (line) => warnings.push(line);
  const run = collectStep(1, o, sampler, new Progress(), new FailureWindow(o.config.orchestrator.max_failure_rate));
  return { run, client, warnings };
}

test("batches whose groups all agree are sampled again until one has a signal", async () => {
  const { run, client, warnings } = await collect(8, 3); // two batches of 4 all right, then a signal
  const collected = await run;
  expect(collected.emptyRetries).toBe(2);
  expect(client.calls).toBe(12);
  expect(collected.kept.length).toBeGreaterThan(0);
  expect(warnings).toHaveLength(2);
  expect(warnings[0]).toContain("nothing to train in this batch (every advantage was 0");
});

test("max_empty_batches batches in a row with nothing to train stop the run, naming the key", async () => {
  const { run, client } = await collect(Infinity, 3);
  await expect(run).rejects.toThrow(
    "step 1: 3 batches in a row had nothing to train (orchestrator.max_empty_batches); the last one because every advantage was 0 (rewards never differed within a group: mean reward 1.000, 0/4 rollouts failed)",
  );
  expect(client.calls).toBe(12);
});
