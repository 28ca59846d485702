// A trace's reward waiting in the barrier book on the group it spawned (src/orchestrator/
// barriers.ts, src/envs/types.ts spawn): the group set stays open until every spawned rollout has
// come back, then the env's settle runs once with what came back, then scoreRollout and scoreGroup
// of the spawning traces; a waiting proposer survives a checkpoint through JSON; a rollout that
// comes back to a trace no longer waiting is ignored; an algorithm's own barrier (proposer peers)
// waits for the group set before it. The proposer env's settle: pass rate and repetition penalty.
import { describe, expect, test } from "bun:test";
import { Algorithm } from "../../../src/algorithms/base.ts";
import { byTask } from "../../../src/algorithms/barriers.ts";
import { centered } from "../../../src/algorithms/group.ts";
import { assignAdvantage } from "../../../src/algorithms/routing.ts";
import type { Rollout } from "../../../src/data/types.ts";
import { settleProposals } from "../../../src/envs/proposer/spawned.ts";
import type { Env, SpawnedOutcome } from "../../../src/envs/types.ts";
import { BarrierBook } from "../../../src/orchestrator/barriers.ts";
import { singleTurn } from "../../fixtures/rollouts.ts";

/** GRPO-like credit within the group, logging each hook in order; optionally a peers barrier. */
class Logged extends Algorithm {
  log: string[] = [];
  constructor(private readonly peers = 0) {
    super({ type: "logged", sampling: { source: "policy" } });
  }
  override barriers() {
    return this.peers ? [byTask("peers", this.peers)] : [];
  }
  override async scoreRollout(r: Rollout): Promise<void> {
    this.log.push(`rollout ${r.id} reward ${r.reward}`);
  }
  override async scoreGroup(group: Rollout[]): Promise<void> {
    this.log.push(`group ${group.map((r) => r.id).join(",")}`);
    centered(group.map((r) => r.reward)).forEach((a, i) => assignAdvantage(group[i]!, a));
  }
  override async scoreBarrier(name: string, members: Rollout[]): Promise<void> {
    this.log.push(`${name} ${members.map((r) => r.id).join(",")}`);
  }
}

/** Group g of two proposers; proposer i spawns `size` solvers (none when size is 0). */
const proposers = (g: number, size = 2) =>
  [0, 1].map((i) =>
    singleTurn(0, 3, 2, {
      id: `g${g}/p${i}`,
      groupId: `g${g}`,
      taskId: "seed",
      info: size ? { spawn: { env: "solve", task: { id: `t${i}`, prompt: [], answer: "1" }, size } } : {},
    }),
  );

/** The solvers a proposer spawned, with these rewards. */
const solvers = (parent: string, rewards: number[]) =>
  rewards.map((reward, j) => singleTurn(reward, 3, 2, { id: `${parent}/spawn/r${j}`, groupId: `${parent}/spawn` }));

/** A settle that rewards each spawning trace with the mean reward of what it spawned, and logs. */
function settler(calls: Array<Record<string, number[]>>): Env["settle"] {
  return (group) => {
    calls.push(Object.fromEntries(group.map(({ rollout, spawned }) => [rollout.id, spawned.map((o) => o.reward)])));
    return group.map(({ spawned }) => ({ reward: spawned.reduce((s, o) => s + o.reward, 0) / spawned.length }));
  };
}

const book = (algo: Algorithm, settle: Env["settle"], maxWait = 4) =>
  new BarrierBook(new Map([["", algo]]), () => "", maxWait, settle);
const ids = (groups: Rollout[][]) => groups.flat().map((r) => r.id);

describe("a group that spawned", () => {
  test("waits until every spawned rollout is back, then settles once, scores each trace, then the group", async () => {
    const algo = new Logged();
    const calls: Array<Record<string, number[]>> = [];
    const b = book(algo, settler(calls));
    expect(await b.arrive(proposers(0), 1)).toEqual([]);
    expect(await b.contribute(solvers("g0/p0", [1, 0]), "g0/p0")).toEqual([]);
    expect(b.held).toBe(2);
    expect(algo.log).toEqual([]); // scoreRollout waits for the reward too
    const released = await b.contribute(solvers("g0/p1", [1, 1]), "g0/p1");
    expect(ids(released)).toEqual(["g0/p0", "g0/p1"]);
    expect(calls).toEqual([{ "g0/p0": [1, 0], "g0/p1": [1, 1] }]);
    expect(algo.log).toEqual(["rollout g0/p0 reward 0.5", "rollout g0/p1 reward 1", "group g0/p0,g0/p1"]);
    expect(released.flat().map((r) => r.advantage)).toEqual([-0.25, 0.25]);
    expect(b.held).toBe(0);
    expect(b.saveState()).toBeUndefined();
  });

  test("a group that spawned nothing is scored on arrival, as every group without spawns", async () => {
    const algo = new Logged();
    const b = book(algo, settler([]));
    expect(ids(await b.arrive(proposers(0, 0), 1))).toEqual(["g0/p0", "g0/p1"]);
    expect(algo.log).toEqual(["group g0/p0,g0/p1"]);
  });

  test("a waiting group survives a checkpoint through JSON, with what already came back", async () => {
    const before = book(new Logged(), settler([]));
    await before.arrive(proposers(0), 1);
    await before.contribute(solvers("g0/p0", [1, 0]), "g0/p0");
    const saved = JSON.parse(JSON.stringify(before.saveState()));
    const algo = new Logged();
    const calls: Array<Record<string, number[]>> = [];
    const after = book(algo, settler(calls));
    after.loadState(saved);
    expect(after.held).toBe(2);
    // the same rollouts again (a pending group resent) count once
    expect(await after.contribute(solvers("g0/p0", [1, 0]), "g0/p0")).toEqual([]);
    expect(ids(await after.contribute(solvers("g0/p1", [0, 0]), "g0/p1"))).toEqual(["g0/p0", "g0/p1"]);
    expect(calls).toEqual([{ "g0/p0": [1, 0], "g0/p1": [0, 0] }]);
  });

  test("times out after max_off_policy_steps when its spawned group never comes back; late arrivals are ignored", async () => {
    const algo = new Logged();
    const b = book(algo, settler([]), 2);
    await b.arrive(proposers(0), 1);
    expect(await b.cut(2)).toEqual([]);
    expect(await b.cut(3)).toEqual([]);
    expect(b.takeCounts()).toEqual({ scored: 0, timedOut: 1, dropped: 2 });
    expect(b.held).toBe(0);
    expect(await b.contribute(solvers("g0/p0", [1, 1]), "g0/p0")).toEqual([]);
    expect(algo.log).toEqual([]);
  });

  test("an algorithm's own barrier waits for the group set before it", async () => {
    const algo = new Logged(4); // peers: 4 proposals of the seed task, across groups
    const b = book(algo, settler([]));
    await b.arrive(proposers(0), 1);
    expect(await b.arrive(proposers(1, 0), 1)).toEqual([]); // scored as a group, waits for its peers
    expect(algo.log).toEqual(["group g1/p0,g1/p1"]); // the peers set is full, g0 not settled
    await b.contribute(solvers("g0/p0", [1, 0]), "g0/p0");
    const released = await b.contribute(solvers("g0/p1", [0, 1]), "g0/p1");
    expect(ids(released).sort()).toEqual(["g0/p0", "g0/p1", "g1/p0", "g1/p1"]);
    expect(algo.log.slice(1)).toEqual([
      "rollout g0/p0 reward 0.5",
      "rollout g0/p1 reward 0.5",
      "group g0/p0,g0/p1",
      "peers g0/p0,g0/p1,g1/p0,g1/p1",
    ]);
  });
});

describe("the proposer env's settle", () => {
  const proposal = (id: string, expression?: string) => ({
    rollout: singleTurn(-1, 3, 2, {
      id,
      info: expression
        ? { spawn: { env: "solve", task: { id, prompt: [], answer: "", info: { expression } }, size: 4 } }
        : {},
    }),
  });
  const outcomes = (correct: number[], failed = 0): SpawnedOutcome[] => [
    ...correct.map((c, j) => ({ rolloutId: `s${j}`, reward: c, metrics: { correct: c }, failed: false })),
    ...Array.from({ length: failed }, (_, j) => ({ rolloutId: `f${j}`, reward: 0, metrics: {}, failed: true })),
  ];

  test("4 p (1 - p) of the finished solvers, less the penalty for a proposal repeated in its group", () => {
    const settled = settleProposals(
      [
        { ...proposal("a", "7+1"), spawned: outcomes([1, 1, 0, 0]) },
        { ...proposal("b", "7+1"), spawned: outcomes([1, 0, 0], 1) },
        { ...proposal("c", "12*3"), spawned: outcomes([1, 1, 1, 1]) },
        { ...proposal("d"), spawned: [] },
      ],
      { diversity: 0.5, frontier: "learnability" },
    );
    // a: p 1/2, repeated once among 4 (1/3); b: p 1/3 over its 3 finished; c: trivial; d: invalid
    expect(settled[0]!.reward).toBeCloseTo(1 - 0.5 / 3, 12);
    expect(settled[1]!.reward).toBeCloseTo(4 * (1 / 3) * (2 / 3) - 0.5 / 3, 12);
    expect(settled[1]!.metrics).toMatchObject({ panel: 3, at_frontier: 1 });
    expect(settled[2]).toEqual({
      reward: 0,
      metrics: { panel: 4, pass_rate: 1, frontier: 0, at_frontier: 0, repetition: 0 },
    });
    expect(settled[3]).toBeUndefined();
  });

  test("the hardness frontier: 1 - p strictly inside (0, 1), 0 at the ends", () => {
    const settled = settleProposals(
      [
        { ...proposal("a", "7+1"), spawned: outcomes([1, 0, 0, 0]) },
        { ...proposal("b", "8+1"), spawned: outcomes([1, 1, 1, 0]) },
        { ...proposal("c", "9+1"), spawned: outcomes([0, 0, 0, 0]) },
      ],
      { diversity: 0, frontier: "hardness" },
    );
    expect(settled.map((s) => s!.reward)).toEqual([0.75, 0.25, 0]);
  });
});
