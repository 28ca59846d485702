// Dependency barriers (src/orchestrator/barriers.ts): a set over N groups is scored exactly once,
// when its last member arrives, with every member; failed members count but are never scored; an
// incomplete set times out as documented (dropped, or scored with what it has); a batch set is
// scored at the cut; a replay brings back only rollouts in no set (barrier_replay.test.ts: with
// the replay sampler); and the waiting members survive a checkpoint through JSON, as through
// kill -9 and --resume, in the book alone and through the collect loop.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Algorithm } from "../../../src/algorithms/base.ts";
import { type BarrierSpec, byBatch, byKey } from "../../../src/algorithms/barriers.ts";
import { centered } from "../../../src/algorithms/group.ts";
import { assignAdvantage } from "../../../src/algorithms/routing.ts";
import type { Rollout } from "../../../src/data/types.ts";
import { BarrierBook } from "../../../src/orchestrator/barriers.ts";
import { sampleGroups } from "../../../src/orchestrator/groups.ts";
import { Progress } from "../../../src/orchestrator/metrics/log.ts";
import { taskSamplerState } from "../../../src/orchestrator/task_sampler.ts";
import { singleTurn } from "../../fixtures/rollouts.ts";
import { LETTERS_ENV } from "../../e2e/train_helpers.ts";
import { harness, Scripted } from "./collect_harness.ts";

/** Centers rewards over every member of a set of its one barrier, and logs each call. */
class OverSets extends Algorithm {
  calls: Array<{ name: string; ids: string[] }> = [];
  constructor(private readonly spec: BarrierSpec) {
    super({ type: "over_sets", sampling: { source: "policy" } });
  }
  override barriers(): BarrierSpec[] {
    return [this.spec];
  }
  override async scoreBarrier(name: string, members: Rollout[]): Promise<void> {
    this.calls.push({ name, ids: members.map((r) => r.id) });
    const advantages = centered(members.map((r) => r.reward));
    members.forEach((r, i) => assignAdvantage(r, advantages[i]!));
  }
}

/** Group g of `size` rollouts, each naming set `key` of `members` rollouts. */
const group = (g: number, key: string, members: number, rewards = [1, 0]) =>
  rewards.map((reward, i) =>
    singleTurn(reward, 3, 2, {
      id: `g${g}/r${i}`,
      groupId: `g${g}`,
      info: { barriers: { solve: { key, size: members } } },
    }),
  );

const book = (algorithm: Algorithm, maxWait = 8) => new BarrierBook(new Map([["", algorithm]]), () => "", maxWait);
const ids = (groups: Rollout[][]) => groups.map((g) => g.map((r) => r.id));

describe("a barrier over 3 groups", () => {
  test("is scored exactly once, when the last member arrives, with all six members", async () => {
    const algo = new OverSets(byKey("solvers", "solve"));
    const b = book(algo);
    expect(await b.arrive(group(0, "p", 6), 1)).toEqual([]);
    expect(await b.arrive(group(1, "p", 6), 1)).toEqual([]);
    expect(algo.calls).toEqual([]);
    expect(b.held).toBe(4);
    const released = await b.arrive(group(2, "p", 6, [1, 1]), 2);
    expect(ids(released)).toEqual([
      ["g0/r0", "g0/r1"],
      ["g1/r0", "g1/r1"],
      ["g2/r0", "g2/r1"],
    ]);
    expect(algo.calls).toEqual([{ name: "solvers", ids: released.flat().map((r) => r.id) }]);
    // rewards 1 0 1 0 1 1, mean 2/3: credit over the set of groups, not within each group
    expect(released.flat().map((r) => r.advantage)).toEqual([1, 0, 1, 0, 1, 1].map((r) => r - 4 / 6));
    expect(b.held).toBe(0);
    expect(await b.cut(2)).toEqual([]);
    expect(algo.calls.length).toBe(1);
    expect(b.takeCounts()).toEqual({ scored: 1, timedOut: 0, dropped: 0 });
  });

  test("counts a failed member towards the set but never holds or scores it", async () => {
    const algo = new OverSets(byKey("solvers", "solve"));
    const b = book(algo);
    await b.arrive(group(0, "p", 6), 1);
    const failing = group(1, "p", 6);
    failing[1]!.error = "reward failed: boom";
    expect(ids(await b.arrive(failing, 1))).toEqual([["g1/r1"]]);
    const released = await b.arrive(group(2, "p", 6), 1);
    expect(released.flat().length).toBe(5);
    expect(algo.calls[0]!.ids).toEqual(["g0/r0", "g0/r1", "g1/r0", "g2/r0", "g2/r1"]);
  });

  test("a rollout in no set passes through untouched (every built-in algorithm)", async () => {
    const algo = new OverSets(byKey("solvers", "solve"));
    const plain = [
      singleTurn(1, 3, 2, { id: "x/r0", groupId: "x" }),
      singleTurn(0, 3, 2, { id: "x/r1", groupId: "x" }),
    ];
    const released = await book(algo).arrive(plain, 1);
    expect(released).toEqual([plain]);
    expect(algo.calls).toEqual([]);
  });
});

describe("an incomplete set times out", () => {
  test("when the batch of step opened + timeoutSteps is cut, dropping its members", async () => {
    const algo = new OverSets(byKey("solvers", "solve", { timeoutSteps: 2 }));
    const b = book(algo);
    await b.arrive(group(0, "p", 6), 1);
    expect(await b.cut(1)).toEqual([]);
    expect(await b.cut(2)).toEqual([]);
    expect(b.held).toBe(2);
    expect(await b.cut(3)).toEqual([]);
    expect(b.held).toBe(0);
    expect(algo.calls).toEqual([]);
    expect(b.takeCounts()).toEqual({ scored: 0, timedOut: 1, dropped: 2 });
    // a later member of the same key opens a new set
    await b.arrive(group(1, "p", 6), 4);
    expect(b.held).toBe(2);
  });

  test("no later than max_off_policy_steps, and with onTimeout score it is scored with what it has", async () => {
    const algo = new OverSets(byKey("solvers", "solve", { timeoutSteps: 10, onTimeout: "score" }));
    const b = book(algo, 1);
    await b.arrive(group(0, "p", 6), 1);
    expect(await b.cut(1)).toEqual([]);
    expect(ids(await b.cut(2))).toEqual([["g0/r0", "g0/r1"]]);
    expect(algo.calls).toEqual([{ name: "solvers", ids: ["g0/r0", "g0/r1"] }]);
    expect(b.takeCounts()).toEqual({ scored: 1, timedOut: 1, dropped: 0 });
  });
});

test("a batch barrier is scored once at the cut with every member of the batch", async () => {
  const algo = new OverSets(byBatch("batch"));
  const b = book(algo);
  await b.arrive(group(0, "p", 6), 1);
  await b.arrive(group(1, "q", 6), 1);
  expect(ids(await b.cut(1))).toEqual([
    ["g0/r0", "g0/r1"],
    ["g1/r0", "g1/r1"],
  ]);
  expect(algo.calls).toEqual([{ name: "batch", ids: ["g0/r0", "g0/r1", "g1/r0", "g1/r1"] }]);
});

test("a replay brings back only rollouts in no set: byKey those the env named no set for, byBatch none", async () => {
  const named = group(0, "p", 6);
  const plain = [singleTurn(1, 3, 2, { id: "x/r0", groupId: "x" }), singleTurn(0, 3, 2, { id: "x/r1", groupId: "x" })];
  const keyed = book(new OverSets(byKey("solvers", "solve")));
  expect(keyed.replayable([...named, ...plain])).toEqual(plain);
  expect(book(new OverSets(byBatch("batch"))).replayable([...named, ...plain])).toEqual([]);
  expect(keyed.held).toBe(0); // asking arrives nothing
});

test("waiting members survive a checkpoint through JSON; the resumed set scores them all once", async () => {
  const before = book(new OverSets(byKey("solvers", "solve")));
  await before.arrive(group(0, "p", 6), 1);
  await before.arrive(group(1, "p", 6), 2);
  const saved = JSON.parse(JSON.stringify(before.saveState()));
  const algo = new OverSets(byKey("solvers", "solve"));
  const after = book(algo);
  after.loadState(saved);
  expect(after.held).toBe(4);
  const released = await after.arrive(group(2, "p", 6), 3);
  expect(released.flat().map((r) => r.id)).toEqual(["g0/r0", "g0/r1", "g1/r0", "g1/r1", "g2/r0", "g2/r1"]);
  expect(algo.calls.length).toBe(1);
  expect(() => book(new OverSets(byKey("other", "solve"))).loadState(saved)).toThrow(/solvers.*does not declare/);
  expect(book(algo).saveState()).toBeUndefined(); // an empty book adds nothing to a checkpoint
});

describe("through the collect loop", () => {
  const envFile = join(mkdtempSync(join(tmpdir(), "rlx-barrier-")), "letters.ts");
  writeFileSync(envFile, LETTERS_ENV);
  /** Groups g0-g2 form one set, g3-g5 the next: a group of groups spanning steps. */
  const everyThree: BarrierSpec = {
    name: "three",
    member: (r) => ({ key: String(Math.floor(Number(/g(\d+)$/.exec(r.groupId)![1]) / 3)), size: 6 }),
    timeoutSteps: 8,
    onTimeout: "drop",
  };
  const setup = async (algo: OverSets) => {
    const client = new Scripted((call) => (call % 2 ? "ab1" : "xyz"));
    const run = await harness({ envFile, client, orchestrator: "batch_size = 4\ngroup_size = 2" });
    run.train.algorithm = algo;
    run.train.barriers = new BarrierBook(new Map([["", algo]]), () => "", 8);
    return { ...taskSamplerState([run.train], 0, 10), o: { ...run.o, envs: [run.train] } };
  };

  test("holds members across steps and a resumed run trains the ones that waited at the checkpoint", async () => {
    const algo = new OverSets(everyThree);
    const run = await setup(algo);
    const step1 = await sampleGroups(1, run.o, run.sampler, new Progress());
    expect(step1.groups).toEqual([]); // g0, g1 wait for g2
    const step2 = await sampleGroups(2, run.o, run.sampler, new Progress());
    expect(step2.groups.map((g) => g[0]!.groupId)).toEqual(["letters/g0", "letters/g1", "letters/g2"]);
    expect(algo.calls.length).toBe(1);
    const saved = JSON.parse(JSON.stringify(run.carried.save()));
    expect(saved["barriers/letters"].waiting.map((r: Rollout) => r.id)).toEqual(["letters/g3/r0", "letters/g3/r1"]);

    const resumedAlgo = new OverSets(everyThree);
    const resumed = await setup(resumedAlgo);
    resumed.carried.load(saved, "test");
    const step3 = await sampleGroups(3, resumed.o, resumed.sampler, new Progress());
    expect(step3.groups.map((g) => g[0]!.groupId)).toEqual(["letters/g3", "letters/g4", "letters/g5"]);
    expect(resumedAlgo.calls.map((c) => c.ids.length)).toEqual([6]);
  });
});
