// The stale drop of the step loop (sampleGroups): a group sampled by weights older than
// max_off_policy_steps is dropped, counted and replaced by a fresh group; rollouts from a frozen
// source never go stale; a policy stuck on old weights aborts the run instead of looping forever.
// The real rollout driver, env and algorithm run against a scripted client that reports versions.
import { expect, test } from "bun:test";
import { sampleGroups } from "../../../src/orchestrator/groups.ts";
import { Progress } from "../../../src/orchestrator/metrics/log.ts";
import { LETTERS_ENV } from "../../e2e/train_helpers.ts";
import { harness, Scripted } from "./collect_harness.ts";
import { writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const envFile = join(mkdtempSync(join(tmpdir(), "rlx-stale-")), "letters.ts");
writeFileSync(envFile, LETTERS_ENV);

/** Replies "ab1" and "xyz" alternately (rewards differ), reporting version(callIndex). */
const versioned = (version: (call: number) => number) => new Scripted((call) => (call % 2 ? "ab1" : "xyz"), version);

const setup = (client: Scripted, frozen = false) =>
  harness({ envFile, client, frozen, orchestrator: "batch_size = 4\ngroup_size = 2\nmax_off_policy_steps = 2" });

test("groups older than max_off_policy_steps are dropped, counted and replaced", async () => {
  // step 5, max_off_policy_steps 2: versions >= 2 are fresh; the first two groups come back at version 1
  const client = versioned((call) => (call < 4 ? 1 : 3));
  const { o, sampler } = await setup(client);
  const { groups, dropped } = await sampleGroups(5, o, sampler, new Progress());
  expect(dropped).toBe(4);
  expect(groups.map((g) => g.map((r) => r.policyVersion))).toEqual([
    [3, 3],
    [3, 3],
  ]);
  expect(groups.map((g) => g[0]!.groupId)).toEqual(["letters/g2", "letters/g3"]); // dropped groups used up their tasks
  expect(groups.flat().every((r) => typeof r.advantage === "number")).toBe(true);
  expect(sampler.saveState().groups).toBe(4);
});

test("a version exactly max_off_policy_steps behind is still fresh", async () => {
  const { o, sampler } = await setup(versioned(() => 2));
  expect((await sampleGroups(5, o, sampler, new Progress())).dropped).toBe(0);
});

test("rollouts from a frozen sampling source never go stale", async () => {
  const { o, sampler } = await setup(
    versioned(() => 0),
    true,
  );
  const { groups, dropped } = await sampleGroups(9, o, sampler, new Progress());
  expect(dropped).toBe(0);
  expect(groups.length).toBe(2);
});

test("a policy stuck on old weights aborts the run with the reason", async () => {
  const client = versioned(() => 0);
  const { o, sampler } = await setup(client);
  await expect(sampleGroups(5, o, sampler, new Progress())).rejects.toThrow(
    // max_empty_batches (10 by default) batches of 4
    `step 5: 40 rollouts in a row were sampled by weights older than version 2 (max_off_policy_steps 2); the last by version 0`,
  );
});
