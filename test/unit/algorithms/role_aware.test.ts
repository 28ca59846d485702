// The role-aware built-ins against hand-computed values: RAE's running per-role baseline
// (b <- 0.95 b + 0.05 r from 0, each rollout scored before its reward updates b; prime-rl's
// rae.py) and hierarchical GRPO's group of groups (solvers centered within their episode,
// proposers across the group; prime-rl's hierarchical_grpo.py).
import { expect, test } from "bun:test";
import { finishGroup } from "../../../src/algorithms/base.ts";
import { HierarchicalGrpo } from "../../../src/algorithms/hierarchical_grpo.ts";
import { Rae } from "../../../src/algorithms/rae.ts";
import { BarrierBook } from "../../../src/orchestrator/barriers.ts";
import { singleTurn } from "../../fixtures/rollouts.ts";

const rae = (decay = 0.95) => new Rae({ type: "rae", sampling: { source: "policy" }, decay });
const traced = (reward: number, role: string, episode = "e0") => singleTurn(reward, 3, 2, { role, info: { episode } });

test("rae turns rewards [1, 0, 1] into advantages [1, -0.05, 0.9525] (b <- 0.95 b + 0.05 r from 0)", async () => {
  const algo = rae();
  const group = [1, 0, 1].map((r) => traced(r, "player"));
  await finishGroup(algo, group);
  const got = group.map((r) => r.advantage!);
  // by hand: b = 0 -> A = 1, b = 0.05 -> A = -0.05, b = 0.0475 -> A = 0.9525
  [1, -0.05, 0.9525].forEach((want, i) => expect(got[i]!).toBeCloseTo(want, 12));
  expect(group[2]!.advantages!.slice(3)).toEqual([got[2]!, got[2]!]); // on the action tokens
});

test("rae keeps one baseline per role, across groups, and through saveState/loadState", async () => {
  const algo = rae();
  await finishGroup(algo, [traced(1, "first"), traced(-1, "second")]);
  const saved = JSON.parse(JSON.stringify(algo.saveState()));
  expect(saved.baselines.first).toBeCloseTo(0.05, 15);
  expect(saved.baselines.second).toBeCloseTo(-0.05, 15);
  const resumed = rae();
  resumed.loadState(saved);
  const next = [traced(1, "first"), traced(1, "second")];
  await finishGroup(resumed, next);
  expect(next[0]!.advantage).toBeCloseTo(0.95, 12); // 1 - 0.05
  expect(next[1]!.advantage).toBeCloseTo(1.05, 12); // 1 - (-0.05)
  expect(rae().saveState()).toBeUndefined();
});

test("hierarchical grpo centers solvers within their episode and proposers across the group", async () => {
  const algo = new HierarchicalGrpo({
    type: "hierarchical_grpo",
    sampling: { source: "policy" },
    episode_roles: ["solver"],
    proposer_peers: 0,
    proposer_timeout_steps: 4,
  });
  // episode e0: proposer 0.5, solvers 1 1 0; episode e1: proposer 0.0, solvers 0 0 0
  const group = [
    traced(0.5, "proposer", "e0"),
    ...[1, 1, 0].map((r) => traced(r, "solver", "e0")),
    traced(0, "proposer", "e1"),
    ...[0, 0, 0].map((r) => traced(r, "solver", "e1")),
  ];
  await finishGroup(algo, group);
  const want = [0.25, 1 / 3, 1 / 3, -2 / 3, -0.25, 0, 0, 0];
  group.forEach((r, i) => expect(r.advantage!).toBeCloseTo(want[i]!, 12));
});

test("hierarchical grpo with proposer_peers = 3: proposers of one seed wait across groups, then center together", async () => {
  const algo = new HierarchicalGrpo({
    type: "hierarchical_grpo",
    sampling: { source: "policy" },
    episode_roles: ["solver"],
    proposer_peers: 3,
    proposer_timeout_steps: 4,
  });
  const book = new BarrierBook(new Map([["", algo]]), () => "", 8);
  const groupOf = (g: number, proposerReward: number, solverRewards: number[]) => {
    const episode = `s/g${g}/r0`;
    const members = [
      singleTurn(proposerReward, 3, 2, {
        id: `${episode}/proposer`,
        groupId: `s/g${g}`,
        taskId: "seed",
        role: "proposer",
        info: { episode },
      }),
      ...solverRewards.map((r, j) =>
        singleTurn(r, 3, 2, {
          id: `${episode}/solver${j}`,
          groupId: `s/g${g}`,
          taskId: "seed",
          role: "solver",
          info: { episode },
        }),
      ),
    ];
    return members;
  };
  const first = groupOf(0, 1, [1, 0]);
  await finishGroup(algo, first);
  const released0 = (await book.arrive(first, 1)).flat();
  expect(released0.map((r) => r.role)).toEqual(["solver", "solver"]); // solvers train at once
  expect(released0.map((r) => r.advantage)).toEqual([0.5, -0.5]);
  expect(first[0]!.advantage).toBeUndefined(); // the proposer waits
  const second = groupOf(1, 0, [0, 0]);
  await finishGroup(algo, second);
  await book.arrive(second, 2);
  const third = groupOf(2, 0.5, [1, 1]);
  await finishGroup(algo, third);
  const released = (await book.arrive(third, 2)).flat();
  const proposers = released.filter((r) => r.role === "proposer").sort((a, b) => a.id.localeCompare(b.id));
  expect(proposers.map((r) => r.id)).toEqual(["s/g0/r0/proposer", "s/g1/r0/proposer", "s/g2/r0/proposer"]);
  // rewards 1, 0, 0.5: mean 0.5
  expect(proposers.map((r) => r.advantage)).toEqual([0.5, -0.5, 0]);
});
