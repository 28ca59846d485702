// Top-k distillation in opd and opsd (k > 0): the teacher's top-k lands on the action tokens of
// each sample (empty slots elsewhere), the action tokens go to the distill component with the
// divergence's beta, the packed row carries the slots; a teacher that cannot score top-k, or
// returns fewer than k, is an endpoint error naming it; k = 0 keeps today's ref_kl path.
import { describe, expect, test } from "bun:test";
import { finishRollout, type FrozenClient } from "../../../src/algorithms/base.ts";
import { Opd } from "../../../src/algorithms/opd.ts";
import { Opsd } from "../../../src/algorithms/opsd.ts";
import { stampLossRouting } from "../../../src/algorithms/routing.ts";
import { rolloutToSamples } from "../../../src/algorithms/samples.ts";
import { packStep } from "../../../src/data/pack.ts";
import { EndpointError, RlxError } from "../../../src/errors.ts";
import type { ScoredSequence } from "../../../src/clients/types.ts";
import { byteContext, utf8 } from "../../fixtures/algo_context.ts";
import { singleTurn, twoSampleRollout } from "../../fixtures/rollouts.ts";

const teacher = { name: "teacher", base_url: "http://127.0.0.1:8001/v1" };

/** A scripted top-k: position p of a sequence predicts ids p*10 .. p*10 + k - 1 with logprobs -1, -2, ... */
function scriptedTop(seqs: number[][], k: number): ScoredSequence[] {
  return seqs.map((seq) => ({
    logprobs: seq.map((_, p) => (p === 0 ? 0 : -0.5)),
    top: seq.map((_, p) =>
      p === 0
        ? null
        : {
            ids: Array.from({ length: k }, (_, j) => p * 10 + j),
            logprobs: Array.from({ length: k }, (_, j) => -(j + 1)),
            rank: 1,
          },
    ),
  }));
}

const teacherClient = (over: Partial<FrozenClient> = {}): FrozenClient => ({
  complete: async () => Promise.reject(new Error("unused")),
  score: async () => Promise.reject(new Error("k > 0 scores with scoreTop")),
  scoreTop: async (seqs, k) => scriptedTop(seqs, k),
  tokenize: async (text) => utf8(text),
  vocabSize: async () => 259,
  ...over,
});

describe("opd with k > 0", () => {
  test("the teacher's top-k on each sample's action tokens, routed to distill with beta, packed with its slots", async () => {
    const algo = new Opd(Opd.schema.parse({ type: "opd", teacher, k: 2, divergence: "jsd", beta: 0.25 }));
    const asked: Array<{ seqs: number[][]; k: number }> = [];
    const client = teacherClient({ scoreTop: async (seqs, k) => (asked.push({ seqs, k }), scriptedTop(seqs, k)) });
    await algo.setup(byteContext({ connect: async () => client }));
    const r = twoSampleRollout();
    await finishRollout(algo, r);
    expect(asked).toEqual([
      {
        seqs: [
          [5, 6, 7, 8],
          [5, 6, 9],
        ],
        k: 2,
      },
    ]);
    expect(r.refLogprobs).toBeUndefined();
    expect(r.advantage).toBeNull();
    // Slots of the action tokens only: positions 2 and 3 of sample 0, position 2 of sample 1.
    expect(r.distillTargets).toEqual({
      k: 2,
      beta: 0.25,
      ids: [-1, -1, -1, -1, 20, 21, 30, 31, -1, -1, -1, -1, 20, 21],
      logprobs: [0, 0, 0, 0, -1, -2, -1, -2, 0, 0, 0, 0, -1, -2],
    });
    expect(algo.actionLoss).toBe("distill");
    const [first, second] = rolloutToSamples(r, algo.actionLoss);
    expect(first!.distillWeights).toEqual([0, 0, 1, 1]);
    expect(first!.distillBetas).toEqual([0.25, 0.25, 0.25, 0.25]);
    expect(first!.rlWeights).toEqual([0, 0, 0, 0]);
    expect(first!.refKlWeights).toBeUndefined();
    expect(second!.distillTargets).toEqual({ k: 2, ids: [-1, -1, -1, -1, 20, 21], logprobs: [0, 0, 0, 0, -1, -2] });
    // Packed beside a sample without distillation: its slots are empty, its distill weight 0.
    const plain = rolloutToSamples(singleTurn(1, 2, 2), "rl")[0]!;
    const step = packStep([first!, plain], { seqLen: 16 });
    expect(step.counts.distill).toBe(2);
    const row = step.rows[0]!;
    expect(row.distillK).toBe(2);
    expect(Array.from(row.distillIds!)).toEqual([-1, -1, -1, -1, 20, 21, 30, 31, ...Array<number>(8).fill(-1)]);
    expect(Array.from(row.distillWeights!)).toEqual([0, 0, 1, 1, 0, 0, 0, 0]);
  });

  test("k = 0 keeps the sampled-token ref_kl path (prefill logprobs, no top-k)", async () => {
    const algo = new Opd(Opd.schema.parse({ type: "opd", teacher }));
    await algo.setup(
      byteContext({ connect: async () => teacherClient({ score: async (s) => s.map((q) => q.map(() => -1)) }) }),
    );
    const r = singleTurn(1);
    await finishRollout(algo, r);
    expect(algo.actionLoss).toBe("ref_kl");
    expect(r.distillTargets).toBeUndefined();
    expect(r.refLogprobs).toEqual([0, 0, 0, -1, -1]);
  });

  test("a teacher without top-k scoring, or with fewer than k alternatives, is an error naming it", async () => {
    const algo = new Opd(Opd.schema.parse({ type: "opd", teacher, k: 4 }));
    await algo.setup(byteContext({ connect: async () => teacherClient({ scoreTop: undefined }) }));
    expect(finishRollout(algo, singleTurn(1))).rejects.toThrow(/the opd teacher "teacher".*cannot score with top-k/);
    expect(finishRollout(algo, singleTurn(1))).rejects.toBeInstanceOf(EndpointError);
    const short = new Opd(Opd.schema.parse({ type: "opd", teacher, k: 4 }));
    await short.setup(
      byteContext({ connect: async () => teacherClient({ scoreTop: async (s) => scriptedTop(s, 2) }) }),
    );
    expect(finishRollout(short, singleTurn(1))).rejects.toThrow(/returned 2 top logprobs at token 3.*asked for 4/);
  });
});

test("opsd with k > 0 scores hint + sequence with the policy's top-k and slices the hint off", async () => {
  const algo = new Opsd(Opsd.schema.parse({ type: "opsd", template: "D:{demonstration}", k: 3 }));
  const calls: number[][] = [];
  await algo.setup(
    byteContext({
      renderer: { render: (m: { content: string }[]) => ({ tokenIds: [900, ...utf8(m[0]!.content), 901] }) },
      policy: {
        complete: async () => Promise.reject(new Error("unused")),
        score: async () => Promise.reject(new Error("k > 0 scores with scoreTop")),
        scoreTop: async (seqs, k) => (calls.push(...seqs), scriptedTop(seqs, k)),
      },
    }),
  );
  const r = singleTurn(1, 2, 2, { info: { demonstration: "ab" } });
  await finishRollout(algo, r);
  const hint = [900, ...utf8("D:ab"), 901]; // 6 tokens: the sequence's position p is p + 6 in the call
  expect(calls).toEqual([[...hint, 10, 11, 12, 13]]);
  expect(r.distillTargets!.ids).toEqual([-1, -1, -1, -1, -1, -1, 80, 81, 82, 90, 91, 92]);
  expect(r.distillTargets!.beta).toBe(1); // the reverse KL by default, as k = 0
  expect(algo.actionLoss).toBe("distill");
});

test("opsd with a frozen teacher scores hint + sequence there, never on the live policy", async () => {
  const algo = new Opsd(Opsd.schema.parse({ type: "opsd", template: "D:{demonstration}", teacher, k: 2 }));
  const calls: number[][] = [];
  const unused = () => Promise.reject(new Error("the live policy must not score"));
  await algo.setup(
    byteContext({
      renderer: { render: (m: { content: string }[]) => ({ tokenIds: [900, ...utf8(m[0]!.content), 901] }) },
      policy: { complete: unused, score: unused, scoreTop: unused },
      connect: async () => teacherClient({ scoreTop: async (seqs, k) => (calls.push(...seqs), scriptedTop(seqs, k)) }),
    }),
  );
  const r = singleTurn(1, 2, 2, { info: { demonstration: "ab" } });
  await finishRollout(algo, r);
  const hint = [900, ...utf8("D:ab"), 901];
  expect(calls).toEqual([[...hint, 10, 11, 12, 13]]);
  expect(r.distillTargets!.ids).toEqual([-1, -1, -1, -1, 80, 81, 90, 91]);
});

describe("min_teacher_prob cuts each sample after its first token the teacher would not have written", () => {
  test("opd: the surprising token trains, the sample's later tokens leave the loss and its count", async () => {
    const algo = new Opd(Opd.schema.parse({ type: "opd", teacher, k: 2, min_teacher_prob: 0.01 }));
    const client = teacherClient({
      scoreTop: async (seqs, k) => {
        const scored = scriptedTop(seqs, k);
        scored[0]!.logprobs[2] = -10; // sample 0's first action token; sample 1 stays at -0.5
        return scored;
      },
    });
    await algo.setup(byteContext({ connect: async () => client }));
    const r = twoSampleRollout();
    await finishRollout(algo, r);
    expect(r.distillWeights).toEqual([0, 0, 1, 0, 0, 0, 1]);
    expect(r.metrics.distill_kept).toBeCloseTo(2 / 3, 12);
    expect(r.distillTargets!.ids.slice(6, 8)).toEqual([30, 31]); // the cut token keeps its slots, at weight 0
    const [first, second] = rolloutToSamples(r, algo.actionLoss);
    expect(first!.distillWeights).toEqual([0, 0, 1, 0]);
    expect(second!.distillWeights).toEqual([0, 0, 1]);
    expect(packStep([first!, second!], { seqLen: 16 }).counts.distill).toBe(2);
  });

  test("opd: a teacher that likes every sampled token cuts nothing", async () => {
    const algo = new Opd(Opd.schema.parse({ type: "opd", teacher, k: 2, min_teacher_prob: 0.5 }));
    await algo.setup(byteContext({ connect: async () => teacherClient() })); // every logprob -0.5 > log 0.5
    const r = twoSampleRollout();
    await finishRollout(algo, r);
    expect(r.distillWeights).toEqual([0, 0, 1, 1, 0, 0, 1]);
    expect(r.metrics.distill_kept).toBe(1);
  });

  test("opsd: the teacher's logprobs are read past the hint", async () => {
    const algo = new Opsd(
      Opsd.schema.parse({ type: "opsd", template: "D:{demonstration}", teacher, k: 2, min_teacher_prob: 0.01 }),
    );
    const hint = [900, ...utf8("D:ab"), 901];
    await algo.setup(
      byteContext({
        renderer: { render: (m: { content: string }[]) => ({ tokenIds: [900, ...utf8(m[0]!.content), 901] }) },
        connect: async () =>
          teacherClient({
            scoreTop: async (seqs, k) => {
              const scored = scriptedTop(seqs, k);
              scored[0]!.logprobs[hint.length + 2] = -10; // the sequence's first action token
              return scored;
            },
          }),
      }),
    );
    const r = singleTurn(1, 2, 2, { info: { demonstration: "ab" } });
    await finishRollout(algo, r);
    expect(r.distillWeights).toEqual([0, 0, 1, 0]);
  });
});

test("routing to distill without the teacher's top-k is an error naming the rollout", () => {
  const sample = rolloutToSamples(singleTurn(1), "rl")[0]!;
  expect(() => stampLossRouting(sample, "distill")).toThrow(RlxError);
  expect(() => stampLossRouting(sample, "distill")).toThrow(/has no distillTargets/);
});
