// The replay sampler and dependency barriers in one run (docs/algorithms.md, "Barriers"): the
// real hierarchical_grpo with proposer_peers (a byTask barrier over the proposals of one seed task,
// across groups and steps), the real replay sampler and barrier book, and a two-role env, through
// the collect loop. The replay buffer stores a group when it is admitted, before its proposers'
// sets are scored, so the rule pinned here is: a replay brings back only the rollouts of a stored
// group that are in no barrier set (the solvers). A proposer trains once, when its set is scored,
// with its set's credit; one dropped by a timeout never trains; a replay never joins or completes
// a set; and a run resumed from the carried state trains what the uninterrupted run trains. (Before
// groups.ts asked the book, a replay trained waiting and dropped proposers without credit, trained
// a member twice, and a resumed run's buffer held copies of waiting members the book never scored.)
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Rollout } from "../../../src/data/types.ts";
import { sampleGroups } from "../../../src/orchestrator/groups.ts";
import { Progress } from "../../../src/orchestrator/metrics/log.ts";
import { harness, Scripted } from "./collect_harness.ts";

/** Two seed tasks, so the proposals of one seed meet again a step later; each episode is one
 * proposer trace and two solver traces; a solver earns 1 for "yes", the proposer its panel's pass rate. */
const PROPOSE_ENV = `
export default {
  id: "propose",
  description: "a proposer and a panel of two solvers",
  create: () => ({
    tools: [],
    maxTurns: 1,
    roles: ["proposer", "solver"],
    load: async (split) => [0, 1].map((i) => ({ id: split + "-" + i, prompt: [], answer: "" })),
    async episode({ task, turn }) {
      const proposal = await turn("proposer", [{ role: "user", content: "Propose after " + task.id + "." }]);
      const solve = [{ role: "user", content: "Solve " + proposal + "." }];
      const answers = await Promise.all(["solver0", "solver1"].map((trace) => turn("solver", solve, { trace })));
      const right = answers.map((a) => (a.includes("yes") ? 1 : 0));
      return { rewards: { proposer: (right[0] + right[1]) / 2, solver0: right[0], solver1: right[1] } };
    },
    reward: () => ({ reward: 0, metrics: {} }),
  }),
};
`;
const envFile = join(mkdtempSync(join(tmpdir(), "rlx-barrier-replay-")), "propose.ts");
writeFileSync(envFile, PROPOSE_ENV);

/** A policy whose replies depend only on how many it gave before (proposals differ, solvers
 * mostly say yes), reporting `version` as the weights that sampled them. */
function policy(): { client: Scripted; version: number } {
  const p = { version: 0 } as { client: Scripted; version: number };
  p.client = new Scripted(
    (call, prompt) => (prompt.includes("Propose") ? `p${call}` : call % 3 ? "yes" : "no"),
    () => p.version,
  );
  return p;
}

/** What one step's batch trains: each rollout's id, whether it was replayed, its credit. */
interface Trained {
  step: number;
  id: string;
  role: string;
  replayed: boolean;
  advantage: number | null | undefined;
}

/** The env through the collect loop with hierarchical_grpo's proposer barrier and a replay sampler;
 * `collect(from, to)` collects those steps (the policy one version behind each, as a trainer
 * keeping up). The harness names the env "letters". */
async function setup(o: { peers: number; timeout?: number; policy?: ReturnType<typeof policy> }) {
  const played = o.policy ?? policy();
  const run = await harness({
    envFile,
    client: played.client,
    orchestrator: [
      "batch_size = 6",
      "group_size = 2",
      "filter_zero_advantages = false",
      `algo = { type = "hierarchical_grpo", proposer_peers = ${o.peers}, proposer_timeout_steps = ${o.timeout ?? 4} }`,
      'sampler = { type = "replay", share = 0.5, max_age = 2, max_replays = 2 }',
    ].join("\n"),
  });
  const scored: string[][] = [];
  const algorithm = run.train.algorithm;
  const scoreBarrier = algorithm.scoreBarrier.bind(algorithm);
  algorithm.scoreBarrier = async (name: string, members: Rollout[]) => {
    scored.push(members.map((r) => r.id));
    return scoreBarrier(name, members);
  };
  const counts = { scored: 0, timedOut: 0, dropped: 0, replayedGroups: 0 };
  const collect = async (from: number, to: number): Promise<Trained[]> => {
    const trained: Trained[] = [];
    for (let step = from; step <= to; step++) {
      played.version = step - 1;
      const got = await sampleGroups(step, run.o, run.sampler, new Progress());
      for (const r of got.groups.flat())
        trained.push({ step, id: r.id, role: r.role!, replayed: got.replayed.has(r), advantage: r.advantage });
      const c = run.train.barriers.takeCounts();
      counts.scored += c.scored;
      counts.timedOut += c.timedOut;
      counts.dropped += c.dropped;
      counts.replayedGroups += got.admission.get("letters")!.replayed;
    }
    return trained;
  };
  return { ...run, policy: played, scored, counts, collect };
}

test("a waiting proposer is never replayed: it trains once, with its set's credit; its solvers replay", async () => {
  const run = await setup({ peers: 4 });
  const trained = await run.collect(1, 8);
  const proposers = trained.filter((t) => t.role === "proposer");
  const solvers = trained.filter((t) => t.role === "solver");
  expect(proposers.length).toBeGreaterThanOrEqual(8);
  // the combination does replay: solvers come back from the buffer with their stored credit
  expect(solvers.filter((t) => t.replayed).length).toBeGreaterThan(0);
  expect(run.counts.replayedGroups).toBeGreaterThan(0);
  // a proposer: never replayed, trained exactly once, in a set of four proposals of its seed
  expect(proposers.filter((t) => t.replayed)).toEqual([]);
  expect(new Set(proposers.map((t) => t.id)).size).toBe(proposers.length);
  expect(proposers.every((t) => typeof t.advantage === "number")).toBe(true);
  const trainedIds = new Set(proposers.map((t) => t.id));
  expect(run.scored.flat().filter((id) => trainedIds.has(id)).length).toBe(proposers.length);
  // a replay never joins a set: every set was scored once, with four distinct proposals
  expect(run.scored.length).toBe(run.counts.scored);
  for (const set of run.scored) {
    expect(set.length).toBe(4);
    expect(new Set(set).size).toBe(4);
    expect(set.every((id) => id.endsWith("/proposer"))).toBe(true);
  }
  expect(new Set(run.scored.flat()).size).toBe(run.scored.flat().length);
  // the centered credit of a set sums to 0 over its four members
  const advantage = new Map(proposers.map((t) => [t.id, t.advantage as number]));
  for (const set of run.scored.filter((s) => s.every((id) => advantage.has(id))))
    expect(Math.abs(set.reduce((sum, id) => sum + advantage.get(id)!, 0))).toBeLessThan(1e-9);
});

test("a proposer whose set timed out is never trained, not even by a replay of its group", async () => {
  // sets of 8 proposals of a seed never fill within the one-step timeout: every proposer is dropped
  const run = await setup({ peers: 8, timeout: 1 });
  const trained = await run.collect(1, 6);
  expect(run.counts.timedOut).toBeGreaterThan(0);
  expect(run.counts.dropped).toBeGreaterThan(0);
  expect(run.counts.scored).toBe(0);
  expect(trained.filter((t) => t.role === "proposer")).toEqual([]);
  expect(trained.filter((t) => t.replayed).length).toBeGreaterThan(0);
});

test("resumed from the carried state after any step, the run trains what the uninterrupted run trains", async () => {
  const whole = await (await setup({ peers: 4 })).collect(1, 8);
  expect(whole.some((t) => t.replayed)).toBe(true);
  let overlaps = 0;
  for (const cut of [1, 2, 3, 4]) {
    const killed = await setup({ peers: 4 });
    const before = await killed.collect(1, cut);
    const saved = JSON.parse(JSON.stringify(killed.carried.save()));
    // a proposer waiting in the book whose group the buffer holds too: after the resume these are
    // two copies, and only the book's is ever scored
    const waiting = new Set(saved["barriers/letters"]?.waiting.map((r: Rollout) => r.id) ?? []);
    const stored = saved["sampler/letters"].buffer.flatMap((g: { group: Rollout[] }) => g.group.map((r) => r.id));
    overlaps += stored.filter((id: string) => waiting.has(id)).length;
    // the same policy, continuing (its replies depend on how many it gave)
    const resumed = await setup({ peers: 4, policy: killed.policy });
    resumed.carried.load(saved, "test");
    const after = await resumed.collect(cut + 1, 8);
    expect([...before, ...after]).toEqual(whole);
  }
  expect(overlaps).toBeGreaterThan(0);
});
