// The samplers inside the step loop's collection (sampleGroups, collectStep): the filter's gate
// replaces rejected groups so a batch is always whole, gives up past its over-sampling bound, and
// is counted; the replay sampler mixes stored groups back in, never staler than its bound and
// with their original policy versions; the task statistics and the audit fields follow. The real
// rollout driver, env and algorithm run against scripted clients.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { collectStep } from "../../../src/orchestrator/collect.ts";
import { sampleGroups } from "../../../src/orchestrator/groups.ts";
import { FailureWindow } from "../../../src/orchestrator/failures.ts";
import { Progress } from "../../../src/orchestrator/metrics/log.ts";
import { taskSamplerMetrics } from "../../../src/orchestrator/metrics/task_sampling.ts";
import { hasSpread } from "../../../src/task_samplers/base.ts";
import { LETTERS_ENV } from "../../e2e/train_helpers.ts";
import { harness, Scripted } from "./collect_harness.ts";

const envFile = join(mkdtempSync(join(tmpdir(), "rlx-admission-")), "letters.ts");
writeFileSync(envFile, LETTERS_ENV);

/** Tasks whose number is even get the same reply every time (a flat group); odd ones alternate. */
const halfFlat = () =>
  new Scripted((call, prompt) =>
    Number(/letters, (\d+)/.exec(prompt)?.[1]) % 2 === 0 ? "abc" : call % 2 ? "ab1" : "xyz",
  );

test("the gate rejects flat groups and draws replacements until the batch holds batch_size rollouts with spread", async () => {
  const { o, sampler, train } = await harness({
    envFile,
    client: halfFlat(),
    orchestrator: 'batch_size = 8\ngroup_size = 2\nsampler = { type = "filter" }',
  });
  for (let step = 1; step <= 4; step++) {
    const waiting = sampler.pending; // admitted in the last step, drawn ahead: this step's first
    const got = await sampleGroups(step, o, sampler, new Progress());
    expect(got.groups.flat().length).toBe(8);
    expect(got.groups.every(hasSpread)).toBe(true);
    const count = got.admission.get("letters")!;
    expect(count.admitted).toBe(4 - waiting + sampler.pending);
    expect(count.rejected).toBeGreaterThan(0);
    expect(count.rejectedRollouts).toBe(2 * count.rejected);
  }
  // every drawn group, admitted or not, counts in its task's statistics
  const seen = [...Array(30).keys()].map((i) => train.stats.get(`train-${i}`)).filter((s) => s !== undefined);
  expect(seen.reduce((n, s) => n + s.attempts, 0)).toBe(2 * sampler.saveState().groups);
});

test("replacement rounds draw ahead; admitted groups the batch does not need are the next step's first", async () => {
  const { o, sampler } = await harness({
    envFile,
    client: halfFlat(),
    orchestrator: 'batch_size = 8\ngroup_size = 2\nsampler = { type = "filter" }',
  });
  let carried = 0;
  let waiting: string[] = [];
  for (let step = 1; step <= 8; step++) {
    const got = await sampleGroups(step, o, sampler, new Progress());
    expect(got.groups.flat().length).toBe(8);
    expect(got.groups.every(hasSpread)).toBe(true);
    // the groups left waiting by the last step open this one, in order
    expect(got.groups.slice(0, waiting.length).map((g) => g[0]!.groupId)).toEqual(waiting);
    const saved = JSON.parse(JSON.stringify(sampler.saveState())) as {
      pending: Array<{ group: { groupId: string }[] }>;
    };
    waiting = saved.pending.map((p) => p.group[0]!.groupId);
    expect(waiting.length).toBe(sampler.pending);
    carried += waiting.length;
  }
  expect(carried).toBeGreaterThan(0);
});

test("past max_oversample the gate admits the step's groups ungated, and says so", async () => {
  const { o, sampler } = await harness({
    envFile,
    client: new Scripted(() => "abc"),
    orchestrator: 'batch_size = 8\ngroup_size = 2\nsampler = { type = "filter", max_oversample = 2 }',
  });
  const got = await sampleGroups(1, o, sampler, new Progress());
  const count = got.admission.get("letters")!;
  // round 1: 4 groups rejected, (2 - 1) x batch_size rollouts: the bound. Round 2 draws twice what
  // is missing (nothing was admitted): 4 groups fill the batch ungated, the 4 drawn ahead are
  // discarded rather than kept for the next step
  expect(count.overBound).toBe(4);
  expect(count.rejected).toBe(8);
  expect(count.rejectedRollouts).toBe(16);
  expect(got.groups.flat().length).toBe(8);
  expect(sampler.saveState().groups).toBe(12);
  expect(sampler.pending).toBe(0);
});

test("replayed groups are never staler than max_age and keep the version that sampled them", async () => {
  let version = 0;
  const { o, sampler, train } = await harness({
    envFile,
    client: new Scripted(
      (call) => (call % 2 ? "ab1" : "xyz"),
      () => version,
    ),
    orchestrator:
      'batch_size = 8\ngroup_size = 2\nmax_off_policy_steps = 3\nsampler = { type = "replay", share = 0.6, max_age = 2, max_replays = 2 }',
  });
  const firstSeen = new Map<string, number>();
  let replays = 0;
  for (let step = 1; step <= 12; step++) {
    version = step - 1; // the trainer keeps up: step N samples with weights N - 1
    const got = await sampleGroups(step, o, sampler, new Progress());
    expect(got.groups.flat().length).toBe(8);
    for (const rollout of got.groups.flat()) {
      if (!got.replayed.has(rollout)) {
        expect(firstSeen.has(rollout.id)).toBe(false);
        firstSeen.set(rollout.id, rollout.policyVersion);
        continue;
      }
      replays++;
      expect(rollout.policyVersion).toBe(firstSeen.get(rollout.id)!);
      expect(rollout.policyVersion).toBeLessThan(step - 1);
      expect(rollout.policyVersion).toBeGreaterThanOrEqual(step - 1 - 2);
    }
    const m = taskSamplerMetrics(step, got, [train], sampler.pending);
    expect(m["sampling/letters/buffer_size"]).toBeLessThanOrEqual(64);
    expect(m["sampling/letters/buffer_age"]).toBeLessThanOrEqual(2);
    expect(m["sampling/letters/replayed"]).toBe(got.admission.get("letters")!.replayed);
  }
  expect(replays).toBeGreaterThan(20);
});

test("collectStep's kept samples name their task's statistics and whether they were replayed", async () => {
  const { o, sampler } = await harness({
    envFile,
    client: new Scripted((call) => (call % 2 ? "ab1" : "xyz")),
    orchestrator: 'batch_size = 4\ngroup_size = 2\nsampler = { type = "replay", share = 1 }',
  });
  const first = await collectStep(1, o, sampler, new Progress(), new FailureWindow(1));
  expect(first.kept.every((k) => k.replayed === false && k.taskStats!.attempts === 2)).toBe(true);
  const second = await collectStep(2, o, sampler, new Progress(), new FailureWindow(1));
  expect(second.kept.map((k) => k.replayed)).toEqual([true, true, true, true]);
  expect(second.kept.map((k) => k.rollout.id).sort()).toEqual(first.kept.map((k) => k.rollout.id).sort());
  expect(second.admission.get("letters")!.replayed).toBe(2);
});

test("a group stored in an earlier round of the same step is not replayed into the batch it is in", async () => {
  // step 5, max_off_policy_steps 2: the first two groups are fresh (and stored), the next two stale,
  // so a second round draws while the buffer holds groups of this very batch
  const { o, sampler } = await harness({
    envFile,
    client: new Scripted(
      (call) => (call % 2 ? "ab1" : "xyz"),
      (call) => (call < 4 ? 3 : call < 8 ? 1 : 4),
    ),
    orchestrator:
      'batch_size = 8\ngroup_size = 2\nmax_off_policy_steps = 2\nsampler = { type = "replay", share = 1, max_age = 2 }',
  });
  const got = await sampleGroups(5, o, sampler, new Progress());
  const ids = got.groups.flat().map((r) => r.id);
  expect(got.dropped).toBe(4);
  expect(ids.length).toBe(8);
  expect(new Set(ids).size).toBe(8);
  expect(got.replayed.size).toBe(0);
});
