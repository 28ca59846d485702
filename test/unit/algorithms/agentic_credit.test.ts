// Agentic credit assignment on real forth rollouts (the rollout driver, the byte tokenizer, the
// ChatML template), judged by a scripted endpoint over HTTP: each part's weight lands on exactly
// the tokens of its assistant turn, with the advantage of the header's formula (checked in
// float64 against an independent computation), and the audit record shows weights and spans.
import { afterEach, expect, test } from "bun:test";
import { AgenticCredit, creditFactors, parseStepWeights } from "../../../src/algorithms/agentic_credit.ts";
import { finishGroup, finishRollout } from "../../../src/algorithms/base.ts";
import { actionMask } from "../../../src/algorithms/routing.ts";
import { rolloutToSamples } from "../../../src/algorithms/samples.ts";
import type { Rollout } from "../../../src/data/types.ts";
import { OpenAIChatClient } from "../../../src/clients/chat_client.ts";
import { parseAudit, auditLine } from "../../../src/rundir/audit.ts";
import { byteContext } from "../../fixtures/algo_context.ts";
import { type ChatBody, type JudgeReply, type JudgeServer, startJudgeServer } from "../../fixtures/judge_server.ts";
import { forthCall, forthRollout, renderer, tokenizer } from "../judges/forth_rollouts.ts";

let server: JudgeServer | undefined;
afterEach(() => server?.stop());

async function credit(rule: (body: ChatBody, n: number) => JudgeReply | Promise<JudgeReply>, extra = {}) {
  server = startJudgeServer(rule);
  const algo = new AgenticCredit(
    AgenticCredit.schema.parse({ type: "agentic_credit", judge: { name: "judge", base_url: server.url, ...extra } }),
  );
  const ctx = byteContext({
    env: "forth",
    connectJudge: async (j) => new OpenAIChatClient(j.name, j.base_url, { retries: 0 }),
    tokenizer,
    renderer,
  });
  await algo.setup(ctx);
  return algo;
}

/** Weights by the rollout's first program: the judge's opinion of each step. */
const WEIGHTS: Record<string, number[]> = {
  "3 4 + .": [1, 0.5],
  "3 4 - .": [0, 0.25],
  "3 4 * .": [0, 1, 0.125],
};
const weightsRule = (body: ChatBody): JudgeReply => {
  const asked = body.messages[1]!.content;
  const code = /forth\(\{"code":"([^"]*)"\}\)/.exec(asked)![1]!;
  return { content: WEIGHTS[code]!.map((w, k) => `STEP ${k + 1}: ${w}`).join("\n") };
};

const group = () =>
  Promise.all([
    forthRollout("good", [forthCall("3 4 + ."), "Answer: 7"]),
    forthRollout("bad", [forthCall("3 4 - ."), "Answer: -1"]),
    forthRollout("long", [forthCall("3 4 * ."), forthCall("3 4 + ."), "Answer: 12"]),
  ]);

/** The expected per-token advantages, computed apart from the algorithm: walk the segments. */
function expected(rollout: Rollout, weights: number[], outcome: number, mix: number): number[] {
  const K = weights.length;
  const share = weights.map((w) => (outcome >= 0 ? w : 1 - w));
  let total = 0;
  for (const s of share) total += s;
  const out: number[] = [];
  let part = 0;
  for (const seg of rollout.segments) {
    const value = seg.sampled ? outcome * (1 - mix + (mix * K * share[part++]!) / total) : 0;
    for (let i = 0; i < seg.tokenIds.length; i++) out.push(value);
  }
  return out;
}

test("each part's weight lands on exactly its turn's tokens (float64), and the audit record shows it", async () => {
  const algo = await credit(weightsRule, {});
  const rollouts = await group();
  expect(rollouts.map((r) => r.reward)).toEqual([1, 0, 0]);
  for (const r of rollouts) await finishRollout(algo, r);
  await finishGroup(algo, rollouts);
  const outcomes = [2 / 3, -1 / 3, -1 / 3];
  for (const [i, r] of rollouts.entries()) {
    const weights = WEIGHTS[Object.keys(WEIGHTS)[i]!]!;
    expect(r.advantage!).toBeCloseTo(outcomes[i]!, 15);
    const want = expected(r, weights, outcomes[i]!, 0.5);
    expect(r.advantages!.length).toBe(want.length);
    r.advantages!.forEach((a, t) => expect(Math.abs(a - want[t]!)).toBeLessThan(1e-15));
    // the factor's mean over parts is 1: the judge moves credit, the outcome's mean per part stays
    const factors = r.credit!.parts.map((p) => p.factor!);
    expect(Math.abs(factors.reduce((a, b) => a + b, 0) / factors.length - 1)).toBeLessThan(1e-15);

    const [sample] = rolloutToSamples(r, "rl");
    const record = parseAudit(
      auditLine({ step: 3, algo: "agentic_credit", rollout: r, sample: sample!, sampleIndex: 0 }),
    )[0]!;
    expect(record.advantage).toBe(r.advantage!);
    expect(record.credit!.judge.kind).toBe("credit");
    expect(record.credit!.judge.messages.at(-1)!.content).toBe(weights.map((w, k) => `STEP ${k + 1}: ${w}`).join("\n"));
    const parts = record.credit!.parts;
    expect(parts.map((p) => p.weight)).toEqual(weights);
    expect(parts.map((p) => p.message_index)).toEqual(r.segments.filter((s) => s.sampled).map((s) => s.messageIndex));
    const onParts = new Set<number>();
    for (const p of parts) {
      // the span is the assistant turn as sampled: its text and <|im_end|>, every token an action
      const text = tokenizer.decode(record.token_ids.slice(p.token_start, p.token_end));
      const turn = r.segments.find((s) => s.sampled && s.messageIndex === p.message_index)!;
      expect(text).toBe(tokenizer.decode(turn.tokenIds));
      for (let t = p.token_start; t < p.token_end; t++) {
        onParts.add(t);
        expect(record.advantages[t]).toBe(r.advantage! * p.factor!);
      }
    }
    record.loss_mask.forEach((m, t) => expect(m === 1).toBe(onParts.has(t)));
    record.advantages.forEach((a, t) => onParts.has(t) || expect(a).toBe(0));
  }
  // the judge saw the steps labelled and the reward
  const asked = server!.requests.map((b) => b.messages[1]!.content).find((c) => c.includes("3 4 * ."))!;
  expect(asked).toContain("REWARD: 0\n\nCONVERSATION (3 steps):\nSTEP 1 [2] assistant:\n");
  expect(asked).toContain("STEP 3 [6] assistant:\nAnswer: 12");
});

test("mix 0 is GRPO; factors keep their mean at 1; weights parse strictly", async () => {
  const algo = await credit(weightsRule, {});
  algo.config.mix = 0;
  const rollouts = await group();
  for (const r of rollouts) await finishRollout(algo, r);
  await finishGroup(algo, rollouts);
  for (const r of rollouts) {
    const mask = actionMask(r);
    expect(r.advantages!).toEqual(mask.map((m) => (m ? r.advantage! : 0)));
  }
  expect(creditFactors([0, 0], 1)).toEqual([1, 1]);
  expect(creditFactors([1, 1], -1)).toEqual([1, 1]);
  expect(creditFactors([1, 0], 1)).toEqual([2, 0]);
  expect(creditFactors([1, 0], -1)).toEqual([0, 2]);
  expect(parseStepWeights("STEP 1: 0.5\nSTEP 2: 1\nSTEP 1: 0", 2)).toEqual([0, 1]);
  expect(parseStepWeights("STEP 1: 0.5\nSTEP 3: 1", 3)).toBe('no "STEP k: w" line with w in [0, 1] for step(s) 2 of 3');
  expect(parseStepWeights("STEP 1: 2", 1)).toBe('no "STEP k: w" line with w in [0, 1] for step(s) 1 of 1');
});

test("a credit judge that errs, stalls or misses a step fails the rollout's scoring with the reason", async () => {
  const cases: Array<[JudgeReply, RegExp]> = [
    [
      { content: "STEP 1: 1" },
      /^the credit judge's answer has no "STEP k: w" line with w in \[0, 1\] for step\(s\) 2 of 2$/,
    ],
    [{ status: 500, error: "overloaded" }, /^the credit judge failed: .*status 500: .*overloaded/],
    [{ stall: true }, /^the credit judge timed out after 200 ms \(judge.timeout_s\)$/],
  ];
  for (const [reply, reason] of cases) {
    const algo = await credit(() => reply, { timeout_s: 0.2 });
    const [r] = await group();
    const err = await finishRollout(algo, r!).catch((e: Error) => e);
    expect((err as Error).message).toMatch(reason);
    expect((err as { judge?: { messages: unknown[] } }).judge!.messages.length).toBeGreaterThanOrEqual(2);
    server!.stop();
  }
});

test("the credit judge's calls never exceed judge.concurrency", async () => {
  const algo = await credit(
    async (body) => {
      await Bun.sleep(30);
      return weightsRule(body);
    },
    { concurrency: 2 },
  );
  const rollouts = (await Promise.all([group(), group(), group()])).flat();
  await Promise.all(rollouts.map((r) => finishRollout(algo, r)));
  expect(server!.requests.length).toBe(9);
  expect(server!.peak).toBe(2);
});
