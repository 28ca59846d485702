// The six algorithms on hand-computed rollouts: what each writes on a rollout (advantages,
// reference logprobs, ce weights) and where, through the same hooks the orchestrator calls.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, EndpointError, RlxError } from "../../../src/errors.ts";
import { finishGroup, finishRollout, type FrozenClient } from "../../../src/algorithms/base.ts";
import { Echo } from "../../../src/algorithms/echo.ts";
import { Grpo } from "../../../src/algorithms/grpo.ts";
import { MaxRl } from "../../../src/algorithms/max_rl.ts";
import { Opd, TOKENIZER_PROBE } from "../../../src/algorithms/opd.ts";
import { Opsd } from "../../../src/algorithms/opsd.ts";
import { Sft } from "../../../src/algorithms/sft.ts";
import { rolloutToSamples } from "../../../src/algorithms/samples.ts";
import type { Rollout } from "../../../src/data/types.ts";
import { byteContext, utf8 } from "../../fixtures/algo_context.ts";
import { makeRollout, singleTurn, twoSampleRollout } from "../../fixtures/rollouts.ts";

const teacher = { name: "teacher", base_url: "http://127.0.0.1:8001/v1" };

describe("grpo", () => {
  test("centers rewards over the trainable rollouts and spreads them over action tokens", async () => {
    const group = [1, 0, 0, 1].map((r) => singleTurn(r));
    const failed = singleTurn(0, 3, 2, { error: "tool crashed" });
    await finishGroup(new Grpo(Grpo.schema.parse({ type: "grpo" })), [...group, failed]);
    expect(group.map((r) => r.advantage)).toEqual([0.5, -0.5, -0.5, 0.5]);
    expect(group[0]!.advantages).toEqual([0, 0, 0, 0.5, 0.5]);
    expect(failed.advantages).toBeUndefined(); // errors are data, never trained, not in the mean
  });
  test("std normalization and length penalty options", async () => {
    const group = [1, 0, 0, 1].map((r) => singleTurn(r));
    await finishGroup(new Grpo(Grpo.schema.parse({ type: "grpo", std_normalize: true })), group);
    expect(group[0]!.advantage).toBeCloseTo(0.5 / (Math.sqrt(1 / 3) + 1e-6), 12);
    const long = [singleTurn(1, 5, 10), singleTurn(1, 5, 20)];
    await finishGroup(new Grpo(Grpo.schema.parse({ type: "grpo", length_penalty: {} })), long);
    expect(long[0]!.advantage).toBeCloseTo(0.0625, 12); // hand-computed in group.test.ts
    expect(long[1]!.advantage).toBeCloseTo(-0.0625, 12);
  });
  test("a uniform group gives exactly zero advantages", async () => {
    const group = [0.7, 0.7, 0.7].map((r) => singleTurn(r));
    await finishGroup(new Grpo(Grpo.schema.parse({ type: "grpo" })), group);
    for (const r of group) expect(r.advantages).toEqual([0, 0, 0, 0, 0]);
  });
});

test("max_rl: (r - mean) / mean and its zero-mean case", async () => {
  const algo = new MaxRl(MaxRl.schema.parse({ type: "max_rl" }));
  const group = [1, 0, 0, 0].map((r) => singleTurn(r));
  await finishGroup(algo, group);
  expect(group.map((r) => r.advantage)).toEqual([3, -1, -1, -1]);
  const none = [0, 0].map((r) => singleTurn(r));
  await finishGroup(algo, none);
  expect(none.map((r) => r.advantage)).toEqual([0, 0]);
});

describe("echo", () => {
  // user prompt (0) | assistant (1) | tool (2, scaffold-content-content-scaffold) | user (3) | assistant (4)
  const conversation = () =>
    makeRollout([
      { role: "user", tokens: 3, messageIndex: 0 },
      { role: "assistant", tokens: 2, sampled: true, messageIndex: 1 },
      { role: "tool", tokens: 4, isContent: [false, true, true, false], messageIndex: 2 },
      { role: "user", tokens: 2, messageIndex: 3 },
      { role: "assistant", tokens: 2, sampled: true, messageIndex: 4 },
    ]);
  const echo = (block: Record<string, unknown> = {}) => new Echo(Echo.schema.parse({ type: "echo", ...block }));

  test("weights only content tokens of tool observations after the first model turn", async () => {
    const r = conversation();
    await finishRollout(echo(), r);
    expect(r.ceWeights).toEqual([0, 0, 0, 0, 0, 0, 0.1, 0.1, 0, 0, 0, 0, 0]);
  });
  test("setting a role replaces the table; the initial prompt is never weighted", async () => {
    const r = conversation();
    await finishRollout(echo({ roles: { user: { alpha: 0.05 } } }), r);
    expect(r.ceWeights).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0.05, 0.05, 0, 0]);
    const none = singleTurn(1);
    await finishRollout(echo({ roles: { user: { alpha: 0.05 } } }), none);
    expect(none.ceWeights).toBeUndefined(); // nothing selected: no stream at all
  });
  test("a message re-rendered after an extension break is weighted once; sampled messages never", async () => {
    const r = makeRollout([
      { role: "user", tokens: 2, messageIndex: 0 },
      { role: "assistant", tokens: 2, sampled: true, messageIndex: 1 },
      { role: "tool", tokens: 2, messageIndex: 2 },
      { role: "user", tokens: 2, messageIndex: 0, sample: 1 }, // re-rendered context
      { role: "assistant", tokens: 2, messageIndex: 1, sample: 1 },
      { role: "tool", tokens: 2, messageIndex: 2, sample: 1 },
      { role: "assistant", tokens: 2, sampled: true, messageIndex: 3, sample: 1 },
    ]);
    await finishRollout(echo({ roles: { tool: { alpha: 0.1 }, assistant: { alpha: 0.3 } } }), r);
    expect(r.ceWeights).toEqual([0, 0, 0, 0, 0.1, 0.1, 0, 0, 0, 0, 0, 0, 0, 0]);
  });
  test("GRPO credit on the actions is inherited, and an existing ce stream merges by max", async () => {
    const group = [conversation(), conversation()];
    group[0]!.reward = 1;
    group[1]!.ceWeights = new Array(13).fill(0).map((_, i) => (i === 7 ? 0.5 : i === 0 ? 0.2 : 0));
    const algo = echo();
    for (const r of group) await finishRollout(algo, r);
    await finishGroup(algo, group);
    expect(group[0]!.advantages).toEqual([0, 0, 0, 0.5, 0.5, 0, 0, 0, 0, 0, 0, 0.5, 0.5]);
    expect(group[1]!.ceWeights).toEqual([0.2, 0, 0, 0, 0, 0, 0.1, 0.5, 0, 0, 0, 0, 0]);
  });
  describe("user filter", () => {
    const dir = mkdtempSync(join(tmpdir(), "rlx-echo-"));
    const write = (name: string, body: string) => {
      const path = join(dir, name);
      writeFileSync(path, body);
      return path;
    };
    test("narrows the selection with one keep-mask per sample", async () => {
      const path = write(
        "keep.ts",
        "export default (rollout, kwargs) => [rollout.segments.flatMap((s) => s.tokenIds).map((_, i) => i !== kwargs.drop)];",
      );
      const algo = echo({ filter: { path, kwargs: { drop: 6 } } });
      await algo.setup(byteContext());
      const r = conversation();
      await finishRollout(algo, r);
      expect(r.ceWeights).toEqual([0, 0, 0, 0, 0, 0, 0, 0.1, 0, 0, 0, 0, 0]);
    });
    test("a wrong number of masks or a wrong length is a clear error", async () => {
      const twoMasks = echo({ filter: { path: write("two.ts", "export default () => [[], []];") } });
      await twoMasks.setup(byteContext());
      expect(finishRollout(twoMasks, conversation())).rejects.toThrow(
        /returned 2 masks for rollout .* which has 1 sample/,
      );
      const short = echo({ filter: { path: write("short.ts", "export default () => [[true, true]];") } });
      await short.setup(byteContext());
      expect(finishRollout(short, conversation())).rejects.toThrow(
        /mask 0 of rollout .* has 2 entries, the sample has 13 tokens/,
      );
      expect(finishRollout(short, conversation())).rejects.toBeInstanceOf(RlxError);
      const notFn = echo({ filter: { path: write("nofn.ts", "export default 3;") } });
      expect(notFn.setup(byteContext())).rejects.toThrow(/default export is not a function/);
    });
  });
});

describe("opd", () => {
  /** Teacher logprob of token i of a sequence: -(id / 100), and 0 for the first token. */
  const teacherScore = async (seqs: number[][]) => seqs.map((seq) => seq.map((id, i) => (i === 0 ? 0 : -id / 100)));
  const teacherClient = (over: Partial<FrozenClient> = {}): FrozenClient => ({
    complete: async () => Promise.reject(new Error("unused")),
    score: teacherScore,
    tokenize: async (text) => utf8(text),
    vocabSize: async () => 259,
    ...over,
  });
  const opd = () => new Opd(Opd.schema.parse({ type: "opd", teacher }));

  test("teacher prefill logprobs land on the action tokens of each sample, aligned per token", async () => {
    const algo = opd();
    const seen: number[][] = [];
    await algo.setup(
      byteContext({ connect: async () => teacherClient({ score: async (s) => (seen.push(...s), teacherScore(s)) }) }),
    );
    const r = twoSampleRollout();
    await finishRollout(algo, r);
    expect(seen).toEqual([
      [5, 6, 7, 8],
      [5, 6, 9],
    ]);
    expect(r.refLogprobs).toEqual([0, 0, -0.07, -0.08, 0, 0, -0.09]);
    expect(r.advantage).toBeNull();
    const [first, second] = rolloutToSamples(r, "ref_kl");
    expect(first!.refLogprobs).toEqual([0, 0, -0.07, -0.08]);
    expect(first!.refKlWeights).toEqual([0, 0, 1, 1]);
    expect(first!.rlWeights).toEqual([0, 0, 0, 0]);
    expect(second!.refLogprobs).toEqual([0, 0, -0.09]);
  });
  test("setup refuses a teacher with another tokenizer", async () => {
    const vocab = opd().setup(byteContext({ connect: async () => teacherClient({ vocabSize: async () => 300 }) }));
    expect(vocab).rejects.toThrow(/tokenizer of 300 ids, the policy's has 259/);
    const probe = opd().setup(
      byteContext({ connect: async () => teacherClient({ tokenize: async (t) => utf8(t.toUpperCase()) }) }),
    );
    expect(probe).rejects.toBeInstanceOf(ConfigError);
    // vLLM reports no vocabulary size: the probe alone decides
    await opd().setup(byteContext({ connect: async () => teacherClient({ vocabSize: undefined }) }));
    expect(TOKENIZER_PROBE.length).toBeGreaterThan(20);
  });
  test("a teacher returning the wrong number of logprobs is an endpoint error", async () => {
    const algo = opd();
    await algo.setup(
      byteContext({ connect: async () => teacherClient({ score: async (s) => s.map((seq) => seq.slice(1)) }) }),
    );
    expect(finishRollout(algo, singleTurn(1))).rejects.toBeInstanceOf(EndpointError);
  });
});

describe("opsd", () => {
  const opsd = (block: Record<string, unknown> = {}) => new Opsd(Opsd.schema.parse({ type: "opsd", ...block }));
  // The renderer wraps the system message in 2 markers; the policy's logprob at position p is -(p+1)/10.
  const renderer = {
    render: (messages: { content: string }[]) => ({ tokenIds: [900, ...utf8(messages[0]!.content), 901] }),
  };
  const setupWith = async (algo: Opsd, calls: number[][]) =>
    algo.setup(
      byteContext({
        renderer,
        policy: {
          complete: async () => Promise.reject(new Error("unused")),
          score: async (s) => (calls.push(...s), s.map((seq) => seq.map((_, p) => -(p + 1) / 10))),
        },
      }),
    );

  test("scores hint + sequence with the live policy and slices the hint off", async () => {
    const calls: number[][] = [];
    const algo = opsd({ template: "D:{demonstration}" });
    await setupWith(algo, calls);
    const r = singleTurn(1, 2, 2, { info: { demonstration: "ab" } });
    await finishRollout(algo, r);
    const hint = [900, ...utf8("D:ab"), 901]; // 6 tokens
    expect(calls).toEqual([[...hint, 10, 11, 12, 13]]);
    expect(r.refLogprobs).toEqual([0, 0, -0.9, -1.0].map((x, i) => (i < 2 ? 0 : x)));
    expect(r.refLogprobs![2]).toBeCloseTo(-(6 + 2 + 1) / 10, 12);
  });
  test("the template fills in {question} (the task's last user turn) in one pass; another placeholder is refused, named", async () => {
    const algo = opsd({ template: "Q:{question} D:{demonstration}" });
    await setupWith(algo, []);
    const r = singleTurn(1, 2, 2, { info: { demonstration: "{question}" } });
    r.task = {
      ...r.task,
      prompt: [
        { role: "system", content: "sys" },
        { role: "user", content: "why" },
      ],
    };
    expect(algo.hintIds(r)).toEqual([900, ...utf8("Q:why D:{question}"), 901]);
    for (const [template, message] of [
      [
        "{demonstration} {problem}",
        "the template names {problem}, which opsd does not fill in; its placeholders are {demonstration}, {question}",
      ],
      ["{question} only", "the template must contain {demonstration}"],
    ])
      expect(() => opsd({ template })).toThrow(message);
  });
  test("finds the demonstration in the task, then task.info; a missing one names the keys", async () => {
    const algo = opsd({ demo_key: "solution", template: "{demonstration}" });
    await setupWith(algo, []);
    const fromTask = singleTurn(1);
    fromTask.task = { ...fromTask.task, solution: "xyz" };
    expect(algo.hintIds(fromTask)).toEqual([900, ...utf8("xyz"), 901]);
    const fromInfo = singleTurn(1);
    fromInfo.task = { ...fromInfo.task, info: { solution: "q" } };
    expect(algo.hintIds(fromInfo)).toEqual([900, 113, 901]);
    const missing = singleTurn(1);
    expect(finishRollout(algo, missing)).rejects.toThrow(/no demonstration under "solution"/);
    try {
      algo.hintIds(missing);
    } catch (err) {
      expect((err as ConfigError).fix).toContain("answer");
    }
  });
});

test("sft: no hooks; routing writes ce 1.0 over the teacher's tokens and zeros rl", async () => {
  const r: Rollout = singleTurn(1, 2, 3);
  await finishRollout(new Sft(Sft.schema.parse({ type: "sft", sampling: { source: teacher } })), r);
  expect(r.advantages).toBeUndefined();
  const [sample] = rolloutToSamples(r, Sft.actionLossType);
  expect(sample!.ceWeights).toEqual([0, 0, 1, 1, 1]);
  expect(sample!.rlWeights).toEqual([0, 0, 0, 0, 0]);
  expect(sample!.advantages).toEqual([0, 0, 0, 0, 0]);
});
