// The advantage estimators rloo and reinforce_pp, and DAPO's soft overlong punishment, against
// closed forms computed here independently (leave-one-out means by explicit loops, batch
// statistics over an explicit per-token list): singleton and uniform groups, reinforce_pp's batch
// normalization across groups through the real barrier book and through the collect loop, and the
// overlong window's edges.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { finishGroup, isTrainable } from "../../../src/algorithms/base.ts";
import { overlongPenalty, rloo, whitened } from "../../../src/algorithms/group.ts";
import { Grpo } from "../../../src/algorithms/grpo.ts";
import { MaxRl } from "../../../src/algorithms/max_rl.ts";
import { ReinforcePp } from "../../../src/algorithms/reinforce_pp.ts";
import { Rloo } from "../../../src/algorithms/rloo.ts";
import type { Rollout } from "../../../src/data/types.ts";
import { ConfigError } from "../../../src/errors.ts";
import { BarrierBook } from "../../../src/orchestrator/barriers.ts";
import { sampleGroups } from "../../../src/orchestrator/groups.ts";
import { Progress } from "../../../src/orchestrator/metrics/log.ts";
import { LETTERS_ENV } from "../../e2e/train_helpers.ts";
import { byteContext } from "../../fixtures/algo_context.ts";
import { rng, singleTurn } from "../../fixtures/rollouts.ts";
import { harness, Scripted } from "../orchestrator/collect_harness.ts";

const close = (actual: readonly number[], expected: readonly number[], digits = 12) => {
  expect(actual.length).toBe(expected.length);
  actual.forEach((a, i) => expect(a).toBeCloseTo(expected[i]!, digits));
};

/** r_i minus the mean of the others, by explicit loops (not the G/(G-1) identity). */
function leaveOneOut(rewards: number[]): number[] {
  return rewards.map((r, i) => {
    if (rewards.length < 2) return 0;
    let others = 0;
    for (let j = 0; j < rewards.length; j++) if (j !== i) others += rewards[j]!;
    return r - others / (rewards.length - 1);
  });
}

/** Whitening over an explicit per-token list: item i repeated weights[i] times. */
function whitenTokens(values: number[], weights: number[]): number[] {
  const tokens: number[] = [];
  values.forEach((v, i) => {
    for (let k = 0; k < weights[i]!; k++) tokens.push(v);
  });
  let sum = 0;
  for (const t of tokens) sum += t;
  const m = sum / tokens.length;
  let sq = 0;
  for (const t of tokens) sq += (t - m) * (t - m);
  const variance = sq / (tokens.length - 1);
  return values.map((v) => (v - m) / Math.sqrt(variance + 1e-8));
}

/** Group `g` of rollouts with these rewards and output (completion) lengths. */
const groupOf = (g: string, rewards: number[], outputs: number[] = rewards.map(() => 2)) =>
  rewards.map((reward, i) => singleTurn(reward, 3, outputs[i]!, { id: `${g}/r${i}`, groupId: g }));

describe("rloo", () => {
  test("each reward minus the mean of the group's other rewards, on random groups", () => {
    const next = rng(7);
    for (const size of [2, 3, 5, 8, 16]) {
      const rewards = Array.from({ length: size }, () => Math.round(next() * 100) / 100);
      close(rloo(rewards), leaveOneOut(rewards));
    }
    close(rloo([1, 0, 0, 1]), [2 / 3, -2 / 3, -2 / 3, 2 / 3]); // 1 - 1/3, 0 - 2/3
  });
  test("a singleton group and a uniform group give exactly 0", () => {
    expect(rloo([0.8])).toEqual([0]);
    expect(rloo([0.7, 0.7, 0.7])).toEqual([0, 0, 0]);
  });
  test("the built-in spreads it over action tokens; failed rollouts are not in the baseline", async () => {
    const group = groupOf("g", [1, 0.5, 0]);
    const failed = singleTurn(1, 3, 2, { error: "reward failed" });
    const algo = new Rloo(Rloo.schema.parse({ type: "rloo" }));
    await algo.setup(byteContext());
    await finishGroup(algo, [...group, failed]);
    close(
      group.map((r) => r.advantage!),
      leaveOneOut([1, 0.5, 0]),
    );
    expect(group[0]!.advantages).toEqual([0, 0, 0, 0.75, 0.75]);
    expect(failed.advantages).toBeUndefined();
    const single = groupOf("s", [1]);
    await finishGroup(algo, single);
    expect(single[0]!.advantages).toEqual([0, 0, 0, 0, 0]);
  });
});

describe("batch whitening (reinforce_pp's normalization)", () => {
  test("matches the statistics of the explicit per-token list", () => {
    const next = rng(3);
    const values = Array.from({ length: 12 }, () => next() * 2 - 1);
    const weights = Array.from({ length: 12 }, () => 1 + Math.floor(next() * 9));
    close(whitened(values, weights), whitenTokens(values, weights));
  });
  test("equal values give exactly 0; a single token has no variance", () => {
    expect(whitened([0.4, 0.4, 0.4], [3, 1, 5])).toEqual([0, 0, 0]);
    expect(whitened([2], [1])).toEqual([0]);
  });
});

/** The env's barrier book around one algorithm, as the orchestrator builds it. */
const bookOf = (algo: ReinforcePp) => new BarrierBook(new Map([["", algo]]), () => "", 8);

describe("reinforce_pp through the barrier book: advantages normalized over the batch, set at the cut", () => {
  const batch = () => [
    groupOf("g0", [1, 0, 0, 1], [2, 5, 3, 4]),
    groupOf("g1", [0.5, 0.5], [6, 1]),
    groupOf("g2", [0.25], [3]), // a singleton: its mean is taken as 0 (verl)
    groupOf("g3", [1, 0.2, 0.6], [1, 2, 7]),
  ];
  const run = async (baseline: "group" | "none", groups: Rollout[][]) => {
    const algo = new ReinforcePp(ReinforcePp.schema.parse({ type: "reinforce_pp", baseline }));
    await algo.setup(byteContext());
    const book = bookOf(algo);
    for (const group of groups) {
      await finishGroup(algo, group);
      // every trainable member waits for the batch (a failed one goes on at once, never trained)
      const passing = (await book.arrive(group, 1)).flat();
      expect(passing.every((r) => !isTrainable(r))).toBe(true);
    }
    expect(groups.flat().every((r) => r.advantages === undefined)).toBe(true);
    const released = await book.cut(1);
    expect(released.map((g) => g[0]!.groupId)).toEqual(groups.map((g) => g[0]!.groupId));
    return released.flat();
  };

  test('baseline = "group" (the default): group means subtracted, then whitened over the tokens of all groups', async () => {
    const groups = batch();
    const rollouts = await run("group", groups);
    const centered = groups.flatMap((g) => {
      const rewards = g.map((r) => r.reward);
      let sum = 0;
      for (const r of rewards) sum += r;
      return rewards.map((r) => (rewards.length > 1 ? r - sum / rewards.length : r));
    });
    const expected = whitenTokens(centered, [2, 5, 3, 4, 6, 1, 3, 1, 2, 7]);
    close(
      rollouts.map((r) => r.advantage!),
      expected,
    );
    expect(rollouts[1]!.advantages).toEqual([0, 0, 0, ...Array(5).fill(rollouts[1]!.advantage)]);
    // g1's equal rewards center to 0, which is not the batch mean: the batch, not the group, decides
    expect(rollouts[4]!.advantage).not.toBe(0);
    expect(ReinforcePp.schema.parse({ type: "reinforce_pp" }).baseline).toBe("group");
  });

  test('baseline = "none" (plain REINFORCE++): raw rewards whitened over the batch', async () => {
    const groups = batch();
    const rollouts = await run("none", groups);
    const rewards = groups.flat().map((r) => r.reward);
    close(
      rollouts.map((r) => r.advantage!),
      whitenTokens(rewards, [2, 5, 3, 4, 6, 1, 3, 1, 2, 7]),
    );
  });

  test("a batch of uniform groups gives exactly 0 with either baseline; failed members never count", async () => {
    for (const baseline of ["group", "none"] as const) {
      const groups = [groupOf("a", [0.7, 0.7], [2, 9]), groupOf("b", [0.7, 0.7, 0.7], [1, 4, 3])];
      groups[1]!.push(singleTurn(0, 3, 2, { id: "b/failed", groupId: "b", error: "env crashed" }));
      const rollouts = (await run(baseline, groups)).filter(isTrainable);
      for (const r of rollouts) expect(r.advantages!.every((a) => a === 0)).toBe(true);
      expect(rollouts.length).toBe(5);
    }
  });
});

describe("reinforce_pp through the collect loop", () => {
  const envFile = join(mkdtempSync(join(tmpdir(), "rlx-rpp-")), "letters.ts");
  writeFileSync(envFile, LETTERS_ENV);
  for (const baseline of ["group", "none"] as const) {
    test(`baseline = "${baseline}": the step's groups arrive with advantages whitened over the whole batch`, async () => {
      const replies = ["ab1", "xyz", "abcd12", "Q", "hello", "a-b-c-d"];
      const client = new Scripted((call) => replies[call % replies.length]!);
      const run = await harness({
        envFile,
        client,
        orchestrator: `batch_size = 6\ngroup_size = 2\nalgo = { type = "reinforce_pp", baseline = "${baseline}" }`,
      });
      const step = await sampleGroups(1, { ...run.o, envs: [run.train] }, run.sampler, new Progress());
      const groups = step.groups;
      expect(groups.length).toBe(3);
      const rollouts = groups.flat();
      const outputs = rollouts.map((r) =>
        r.segments.filter((s) => s.sampled).reduce((n, s) => n + s.tokenIds.length, 0),
      );
      const values = groups.flatMap((g) => {
        const m = (g[0]!.reward + g[1]!.reward) / 2;
        return g.map((r) => (baseline === "group" ? r.reward - m : r.reward));
      });
      expect(new Set(rollouts.map((r) => r.reward)).size).toBeGreaterThan(2);
      close(
        rollouts.map((r) => r.advantage!),
        whitenTokens(values, outputs),
      );
    });
  }
});

describe("DAPO's soft overlong punishment", () => {
  const w = { maxTokens: 100, buffer: 20, penaltyFactor: 1 };
  test("0 up to L_max - L_cache, a linear ramp to -1 at L_max, -1 past it", () => {
    expect(overlongPenalty(0, w)).toBe(0);
    expect(overlongPenalty(80, w)).toBe(0);
    expect(overlongPenalty(81, w)).toBeCloseTo(-1 / 20, 14);
    expect(overlongPenalty(90, w)).toBeCloseTo(-0.5, 14);
    expect(overlongPenalty(99, w)).toBeCloseTo(-19 / 20, 14);
    expect(overlongPenalty(100, w)).toBe(-1);
    expect(overlongPenalty(101, w)).toBe(-1);
    expect(overlongPenalty(10_000, w)).toBe(-1);
  });
  test("penalty_factor scales the ramp and the floor (verl's overlong_buffer.penalty_factor)", () => {
    const half = { ...w, penaltyFactor: 0.5 };
    expect(overlongPenalty(90, half)).toBeCloseTo(-0.25, 14);
    expect(overlongPenalty(100, half)).toBe(-0.5);
    expect(overlongPenalty(150, half)).toBe(-0.5);
  });

  // Outputs 2, 5, 6, 9 against L_max 8, L_cache 4: penalties 0, -1/4, -2/4, -1.
  const outputs = [2, 5, 6, 9];
  const shaped = (rewards: number[]) => rewards.map((r, i) => r + [0, -0.25, -0.5, -1][i]!);
  const block = { overlong: { buffer: 4, max_tokens: 8 } };

  test("grpo, rloo and max_rl shape each reward before their credit", async () => {
    const rewards = [1, 1, 0, 1];
    const cases = [
      [
        new Grpo(Grpo.schema.parse({ type: "grpo", ...block })),
        (r: number[]) => r.map((x) => x - r.reduce((a, b) => a + b) / r.length),
      ],
      [new Rloo(Rloo.schema.parse({ type: "rloo", ...block })), leaveOneOut],
      [
        new MaxRl(MaxRl.schema.parse({ type: "max_rl", ...block })),
        (r: number[]) => {
          const m = r.reduce((a, b) => a + b) / r.length;
          return r.map((x) => (x - m) / m);
        },
      ],
    ] as const;
    for (const [algo, credit] of cases) {
      const group = groupOf("g", rewards, outputs);
      await algo.setup(byteContext());
      await finishGroup(algo, group);
      close(
        group.map((r) => r.advantage!),
        credit(shaped(rewards)),
      );
      expect(group.map((r) => r.reward)).toEqual(rewards); // the rollout keeps the env's reward
    }
  });

  test("reinforce_pp shapes the rewards before its group baseline and the batch", async () => {
    const algo = new ReinforcePp(ReinforcePp.schema.parse({ type: "reinforce_pp", ...block }));
    await algo.setup(byteContext());
    const group = groupOf("g", [1, 1, 0, 1], outputs);
    const book = bookOf(algo);
    await book.arrive(group, 1);
    await book.cut(1);
    const s = shaped([1, 1, 0, 1]);
    const m = s.reduce((a, b) => a + b) / s.length;
    close(
      group.map((r) => r.advantage!),
      whitenTokens(
        s.map((x) => x - m),
        outputs,
      ),
    );
  });

  test("L_max defaults to the env's max_tokens, known at setup; a buffer not below it is a ConfigError", async () => {
    const algo = new Rloo(Rloo.schema.parse({ type: "rloo", overlong: { buffer: 4 } }));
    await algo.setup(byteContext({ maxTokens: 8 }));
    const group = groupOf("g", [1, 1, 0, 1], outputs);
    await finishGroup(algo, group);
    close(
      group.map((r) => r.advantage!),
      leaveOneOut(shaped([1, 1, 0, 1])),
    );
    const tight = new Grpo(Grpo.schema.parse({ type: "grpo", overlong: { buffer: 8 } }));
    const error = await tight.setup(byteContext({ maxTokens: 8, env: "math" })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toContain('env "math": algo.overlong.buffer 8');
  });

  test("an overlong block scored before setup is an error, not silently unshaped", async () => {
    const algo = new Grpo(Grpo.schema.parse({ type: "grpo", overlong: { buffer: 4 } }));
    const group = groupOf("g", [1, 0]);
    await expect(algo.scoreGroup(group)).rejects.toThrow(/before the algorithm's setup/);
  });
});
