// The algorithms on a real rollout: the forth env through the rollout driver, the byte tokenizer
// and the ChatML template, with a scripted client (so the tokens are known). Checks that ECHO
// weights exactly the tool output's text, OPSD's hint is the template's system block, and OPD's
// tokenizer check accepts the policy's own tokenizer.
import { expect, test } from "bun:test";
import forth, { FORTH_SYSTEM_PROMPT } from "../../../src/envs/forth/index.ts";
import { createEnv } from "../../../src/envs/index.ts";
import type { Completion, CompletionRequest, SamplingClient } from "../../../src/clients/types.ts";
import {
  byteGenerationConfig,
  byteTokenizerConfig,
  byteTokenizerJson,
  IM_END_ID,
} from "../../../src/model/byte_tokenizer.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";
import { type AlgorithmContext, finishGroup, finishRollout } from "../../../src/algorithms/base.ts";
import { Echo } from "../../../src/algorithms/echo.ts";
import { checkSameTokenizer } from "../../../src/algorithms/opd.ts";
import { Opsd } from "../../../src/algorithms/opsd.ts";
import { Sft } from "../../../src/algorithms/sft.ts";
import { packStep } from "../../../src/data/pack.ts";
import { runRollout } from "../../../src/rollout/driver.ts";
import { filterZeroAdvantage, rolloutToSamples } from "../../../src/algorithms/samples.ts";

const tokenizer = new Tokenizer(byteTokenizerJson(), byteTokenizerConfig(), byteGenerationConfig());
const renderer = new ChatRenderer(tokenizer);

/** Replays completions as byte tokens + <|im_end|>; scores every token -0.1 * position. */
class Scripted implements SamplingClient {
  scored: number[][] = [];
  constructor(private readonly replies: string[]) {}
  async complete(_: CompletionRequest): Promise<Completion> {
    const tokenIds = [...tokenizer.encodePlain(this.replies.shift()!), IM_END_ID];
    return { tokenIds, logprobs: tokenIds.map(() => -0.1), finishReason: "stop", policyVersion: 1 };
  }
  async score(sequences: number[][]): Promise<number[][]> {
    this.scored.push(...sequences);
    return sequences.map((s) => s.map((_, p) => -0.1 * p));
  }
}

const call = (code: string) =>
  `<tool_call>\n{"name": "forth", "arguments": {"code": ${JSON.stringify(code)}}}\n</tool_call>`;
const task = {
  id: "add",
  prompt: [
    { role: "system" as const, content: FORTH_SYSTEM_PROMPT },
    { role: "user" as const, content: "Use Forth to compute 3 + 4." },
  ],
  answer: "7",
  solution: "3 4 + . gives 7",
  info: { numeric: true },
};

async function forthRollout(client: SamplingClient, id: string, replies?: string[]) {
  const env = await createEnv(forth, {});
  const sampling = { maxTokens: 200, temperature: 1, topP: 1, topK: 0 };
  const c = replies ? new Scripted(replies) : client;
  return runRollout({ id, groupId: "g", envId: "forth", env, task, client: c, renderer, sampling });
}

function context(policy: SamplingClient): AlgorithmContext {
  return {
    env: "forth",
    policy,
    maxTokens: 200,
    connect: async () => ({ ...policy, tokenize: async (t: string) => tokenizer.encodePlain(t) }),
    connectJudge: async () => {
      throw new Error("no judge in this test");
    },
    tokenizer,
    renderer,
    logger: { info() {}, warn() {} },
  };
}

test("echo weights exactly the tool output's content tokens, and the step packs", async () => {
  const good = await forthRollout(new Scripted([]), "a", [call("3 4 + ."), "Answer: 7"]);
  const bad = await forthRollout(new Scripted([]), "b", [call("3 4 - ."), "Answer: -1"]);
  expect([good.reward, bad.reward]).toEqual([1, 0]);
  const echo = new Echo(Echo.schema.parse({ type: "echo" }));
  await echo.setup(context(new Scripted([])));
  for (const r of [good, bad]) await finishRollout(echo, r);
  await finishGroup(echo, [good, bad]);
  const tokens = good.segments.flatMap((s) => s.tokenIds);
  const weighted = tokens.filter((_, i) => good.ceWeights![i] === 0.1);
  expect(tokenizer.decode(weighted)).toBe(good.messages[3]!.content); // "7 \nstack: <0>"
  expect(good.messages[3]!.role).toBe("tool");
  expect(good.advantage).toBe(0.5);
  const { kept } = filterZeroAdvantage([good, bad].flatMap((r) => rolloutToSamples(r, "rl")));
  const step = packStep(kept, { seqLen: 4096 });
  expect(step.counts.ce).toBe(weighted.length + bad.ceWeights!.filter((w) => w > 0).length);
  expect(tokenizer.decode(bad.segments.flatMap((s) => s.tokenIds).filter((_, i) => bad.ceWeights![i]! > 0))).toBe(
    bad.messages[3]!.content,
  );
  expect(step.counts.rl).toBe(
    [good, bad].reduce((n, r) => n + r.segments.filter((s) => s.sampled).reduce((m, s) => m + s.tokenIds.length, 0), 0),
  );
});

test("opsd renders the hint with the chat template and slices it off the policy's score", async () => {
  const policy = new Scripted([]);
  const r = await forthRollout(policy, "c", [call("3 4 + ."), "Answer: 7"]);
  const opsd = new Opsd(Opsd.schema.parse({ type: "opsd", demo_key: "solution" }));
  await opsd.setup(context(policy));
  await finishRollout(opsd, r);
  const hint = opsd.hintIds(r);
  expect(tokenizer.decode(hint)).toBe(
    "<|im_start|>system\nHere is an example of an expert response:\n<demonstration>\n3 4 + . gives 7\n</demonstration><|im_end|>\n",
  );
  const sequence = r.segments.flatMap((s) => s.tokenIds);
  expect(policy.scored).toEqual([[...hint, ...sequence]]);
  const firstAction = r.segments.findIndex((s) => s.sampled);
  const at = r.segments.slice(0, firstAction).reduce((n, s) => n + s.tokenIds.length, 0);
  expect(r.refLogprobs![at]).toBeCloseTo(-0.1 * (hint.length + at), 12);
  expect(r.refLogprobs![0]).toBe(0);
});

test("opd's tokenizer check accepts the policy's own tokenizer", async () => {
  const frozen = {
    ...new Scripted([]),
    complete: async () => Promise.reject(new Error("unused")),
    score: async () => [],
    tokenize: async (t: string) => tokenizer.encodePlain(t),
    vocabSize: async () => tokenizer.size,
  };
  await checkSameTokenizer(context(new Scripted([])), frozen, "the teacher");
});

test("sft's setup checks its sampling source's tokenizer as opd checks a teacher", async () => {
  const source = { name: "src", base_url: "http://127.0.0.1:9/v1" };
  const sft = new Sft(Sft.schema.parse({ type: "sft", sampling: { source } }));
  const asked: unknown[] = [];
  const withTokenizer = (encode: (t: string) => number[], vocab?: number): AlgorithmContext => ({
    ...context(new Scripted([])),
    connect: async (model) => {
      asked.push(model);
      const replay = new Scripted([]);
      return {
        complete: (r) => replay.complete(r),
        score: (seqs) => replay.score(seqs),
        tokenize: async (t: string) => encode(t),
        vocabSize: async () => vocab,
      };
    },
  });
  await sft.setup(withTokenizer((t) => tokenizer.encodePlain(t), tokenizer.size));
  expect(asked).toEqual([source]);
  await expect(sft.setup(withTokenizer((t) => tokenizer.encodePlain(t), tokenizer.size + 7))).rejects.toThrow(
    `the sft sampling source "src" (http://127.0.0.1:9/v1) has a tokenizer of ${tokenizer.size + 7} ids`,
  );
  await expect(sft.setup(withTokenizer((t) => tokenizer.encodePlain(t).slice(1)))).rejects.toThrow(
    /the sft sampling source "src" .* tokenizes a probe string differently from the policy/,
  );
});
