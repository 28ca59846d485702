// Multi-agent episodes through the collect loop (src/rollout/episode.ts): the built-in nim env,
// its `first` role played by the policy and its `second` role by a frozen endpoint (a scripted
// client here). Each role's tokens are its own trace's; the frozen role's traces are recorded
// (metrics per env and role) but never reach an algorithm, a sample or the step file.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { packStep } from "../../../src/data/pack.ts";
import type { Rollout } from "../../../src/data/types.ts";
import { buildSamples, collectedMetrics, collectStep } from "../../../src/orchestrator/collect.ts";
import { FailureWindow } from "../../../src/orchestrator/failures.ts";
import { Progress } from "../../../src/orchestrator/metrics/log.ts";
import { readStepBatch, writeStepBatch } from "../../../src/rundir/step_file.ts";
import { auditRecord } from "../../../src/rundir/audit.ts";
import { harness, Scripted } from "./collect_harness.ts";

test("a frozen role's tokens never appear in a step file; each role's tokens are its own", async () => {
  // the policy (first) takes 2 or 3 in turn, the frozen opponent (second) always says "1 stone"
  const policy = new Scripted((call) => (call % 2 ? "3" : "2"));
  const frozen = new Scripted(() => "1 stone");
  const run = await harness({
    envFile: "nim",
    client: policy,
    orchestrator: 'batch_size = 4\ngroup_size = 2\nalgo = { type = "rae" }',
  });
  run.train.players = new Map([["second", { client: frozen, trains: false }]]);
  const collected = await collectStep(1, run.o, run.sampler, new Progress(), new FailureWindow(1));
  const rollouts = collected.groups.flat();
  const first = rollouts.filter((r) => r.role === "first");
  const second = rollouts.filter((r) => r.role === "second");
  expect(first.length).toBeGreaterThan(0);
  expect(second.length).toBeGreaterThan(0);
  expect(second.every((r) => r.trains === false && r.advantage === undefined)).toBe(true);
  // a trace's sampled tokens are its role's replies, and nothing else
  const replies = (r: Rollout) =>
    r.segments.filter((s) => s.sampled).map((s) => String.fromCharCode(...s.tokenIds.filter((t) => t < 256)));
  expect(new Set(first.flatMap(replies))).toEqual(new Set(["2", "3"]));
  expect(new Set(second.flatMap(replies))).toEqual(new Set(["1 stone"]));
  // zero-sum outcome per episode
  for (const r of first) {
    const other = second.find((s) => s.info.episode === r.info.episode);
    if (other) expect(r.reward + other.reward).toBe(0);
  }

  const secondIds = new Set(second.map((r) => r.id));
  expect(collected.kept.some((k) => secondIds.has(k.rollout.id))).toBe(false);
  const packed = packStep(
    collected.kept.map((k) => k.sample),
    { seqLen: 4096 },
  );
  const path = join(run.dir, "step_1.bin");
  writeStepBatch(path, {
    step: 1,
    packed: {
      ...packed,
      rows: packed.rows.map((row) => ({ ...row, samples: row.samples.map((s) => ({ ...s, policyVersion: 0 })) })),
    },
    metrics: {},
    state: { format: 2, step: 1, carried: {} },
  });
  const back = readStepBatch(path);
  const ids = back.packed.rows.flatMap((row) => row.samples.map((s) => s.rolloutId));
  expect(ids.length).toBeGreaterThan(0);
  expect(ids.every((id) => id.endsWith("/first"))).toBe(true);
  // the frozen role's reply "1 stone" is never an action token of the step
  const actions = back.packed.rows.flatMap((row) =>
    Array.from(row.tokenIds)
      .filter((_, i) => row.lossMask[i] === 1)
      .map((t) => (t < 256 ? String.fromCharCode(t) : "")),
  );
  expect(actions.join("")).not.toContain(" stone");

  // audit records name the role and episode; metrics per env and role
  const record = auditRecord({ step: 1, ...collected.kept[0]! });
  expect(record.role).toBe("first");
  expect(record.episode).toBe(collected.kept[0]!.rollout.info.episode as string);
  const metrics = collectedMetrics(1, collected, ["letters"], 1);
  expect(metrics["role/letters/second/trains"]).toBe(0);
  expect(metrics["role/letters/first/trains"]).toBe(1);
  expect(metrics["role/letters/first/traces"]).toBe(first.length);
  expect(typeof metrics["role/letters/first/first_wins"]).toBe("number");
  expect(buildSamples([second], run.o.envs, false).kept).toEqual([]);
});

test("the one-file multi-agent env of the docs (examples/envs/guess.ts) runs, its hinter kept out of training", async () => {
  // the guesser says 3, then 5; the hinter says "higher"
  const policy = new Scripted((_call, prompt) =>
    prompt.includes("The number is") ? "higher" : prompt.includes("Hint: higher") ? "5" : "3",
  );
  const run = await harness({
    envFile: join(import.meta.dir, "../../../examples/envs/guess.ts"),
    client: policy,
    orchestrator: 'batch_size = 8\ngroup_size = 2\nalgo = { type = "rae" }',
  });
  run.train.players = new Map([["hinter", { client: policy, trains: false }]]);
  const collected = await collectStep(1, run.o, run.sampler, new Progress(), new FailureWindow(1));
  const rollouts = collected.groups.flat();
  expect(rollouts.every((r) => !r.error)).toBe(true);
  for (const r of rollouts.filter((r) => r.role === "guesser")) {
    const want = { "3": 1, "5": 0.5 }[r.task.answer] ?? 0;
    expect([r.task.answer, r.reward]).toEqual([r.task.answer, want]);
  }
  const hinters = new Set(rollouts.filter((r) => r.role === "hinter").map((r) => r.id));
  expect(hinters.size).toBeGreaterThan(0);
  expect(collected.kept.every((k) => k.rollout.role === "guesser" && !hinters.has(k.rollout.id))).toBe(true);
});
