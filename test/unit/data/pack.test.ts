// Packing (docs/architecture.md §4; as prime-rl's trainer/batch.py): first-fit decreasing, truncation, streams materialized
// with the right defaults on both sides of a row boundary, padding at weight 0 in every stream,
// and the step's member counts.
import { describe, expect, test } from "bun:test";
import { firstFitDecreasing, packStep, type PackedRow, rowCounts } from "../../../src/data/pack.ts";
import type { TrainingSample } from "../../../src/data/types.ts";

/** A sample of `prompt` context tokens then `actions` action tokens, tagged by `id` in its token ids. */
function sample(id: number, prompt: number, actions: number, over: Partial<TrainingSample> = {}): TrainingSample {
  const n = prompt + actions;
  const mask = Array.from({ length: n }, (_, i) => (i >= prompt ? 1 : 0));
  return {
    tokenIds: Array.from({ length: n }, (_, i) => id * 100 + i),
    lossMask: mask,
    advantages: mask.map((m) => m * 0.5),
    inferenceLogprobs: mask.map((m) => (m ? -1 : 0)),
    temperatures: mask.map((m) => (m ? 0.8 : 1)),
    env: `env${id}`,
    rolloutId: `r${id}`,
    ...over,
  };
}
const grpo = (id: number, p: number, a: number) => sample(id, p, a);
const opd = (id: number, p: number, a: number) => {
  const s = sample(id, p, a);
  return {
    ...s,
    advantages: s.advantages.map(() => 0),
    rlWeights: s.lossMask.map(() => 0),
    refKlWeights: [...s.lossMask],
    refLogprobs: s.lossMask.map((m) => (m ? -2 : 0)),
  };
};
const sft = (id: number, p: number, a: number) => {
  const s = sample(id, p, a);
  return {
    ...s,
    advantages: s.advantages.map(() => 0),
    rlWeights: s.lossMask.map(() => 0),
    ceWeights: [...s.lossMask],
  };
};
/** grpo actions plus ce 0.1 on the last prompt token (an observation). */
const echo = (id: number, p: number, a: number) => {
  const s = sample(id, p, a);
  return { ...s, ceWeights: s.lossMask.map((_, i) => (i === p - 1 ? 0.1 : 0)) };
};
const slice = (row: PackedRow, key: "rlWeights" | "ceWeights" | "refKlWeights" | "refLogprobs", k: number) => {
  const info = row.samples[k]!;
  return Array.from(row[key]!.subarray(info.start, info.start + info.length));
};

test("first-fit decreasing", () => {
  // longest first: 6 -> row 0, 5 -> row 1, 4 -> row 2, 3 -> row 1 (5+3), 2 -> row 0 (6+2)
  expect(firstFitDecreasing([5, 3, 4, 2, 6], 8)).toEqual([[4, 3], [0, 1], [2]]);
  expect(firstFitDecreasing([], 8)).toEqual([]);
});

describe("packStep", () => {
  test("mixed grpo + opd + sft + echo in one row: every stream filled with its default", () => {
    const step = packStep([grpo(1, 2, 3), opd(2, 2, 2), sft(3, 1, 2), echo(4, 3, 1)], { seqLen: 64 });
    expect(step.rows).toHaveLength(1);
    const row = step.rows[0]!;
    const order = row.samples.map((s) => s.rolloutId);
    expect(order).toEqual(["r1", "r2", "r4", "r3"]); // lengths 5, 4, 4, 3 (ties keep input order)
    const k = (id: string) => order.indexOf(id);
    expect(slice(row, "rlWeights", k("r1"))).toEqual([1, 1, 1, 1, 1]); // rl default 1
    expect(slice(row, "rlWeights", k("r4"))).toEqual([1, 1, 1, 1]);
    expect(slice(row, "rlWeights", k("r2"))).toEqual([0, 0, 0, 0]);
    expect(slice(row, "ceWeights", k("r1"))).toEqual([0, 0, 0, 0, 0]); // ce default 0
    expect(slice(row, "ceWeights", k("r4")).map((x) => Math.fround(x))).toEqual([0, 0, Math.fround(0.1), 0]);
    expect(slice(row, "ceWeights", k("r3"))).toEqual([0, 1, 1]);
    expect(slice(row, "refKlWeights", k("r2"))).toEqual([0, 0, 1, 1]);
    expect(slice(row, "refKlWeights", k("r3"))).toEqual([0, 0, 0]); // ref_kl default 0
    expect(slice(row, "refLogprobs", k("r2"))).toEqual([0, 0, -2, -2]);
    expect(slice(row, "refLogprobs", k("r1"))).toEqual([0, 0, 0, 0, 0]); // ref logprobs placeholder 0
    expect(Array.from(row.sampleLengths)).toEqual([5, 4, 4, 3]);
    expect(Array.from(row.temperatures.subarray(0, 5)).map(Math.fround)).toEqual(
      [1, 1, 0.8, 0.8, 0.8].map(Math.fround),
    );
    expect(step.envs).toEqual(["env1", "env2", "env3", "env4"]);
    expect(Array.from(row.envIndex.subarray(5, 9))).toEqual([1, 1, 1, 1]);
  });

  test("a stream is backfilled on both sides of the row boundary", () => {
    // seq_len 6: each row holds one 4-token and one 2-token sample; the stream's carrier is first
    // in one row and second in the other.
    const step = packStep([opd(1, 2, 2), grpo(2, 1, 1), grpo(3, 2, 2), opd(4, 1, 1)], { seqLen: 6 });
    expect(step.rows.map((r) => r.samples.map((s) => s.rolloutId))).toEqual([
      ["r1", "r2"],
      ["r3", "r4"],
    ]);
    const [a, b] = step.rows as [PackedRow, PackedRow];
    expect(Array.from(a.rlWeights!)).toEqual([0, 0, 0, 0, 1, 1]);
    expect(Array.from(b.rlWeights!)).toEqual([1, 1, 1, 1, 0, 0]);
    expect(Array.from(a.refKlWeights!)).toEqual([0, 0, 1, 1, 0, 0]);
    expect(Array.from(b.refKlWeights!)).toEqual([0, 0, 0, 0, 0, 1]);
    expect(Array.from(b.refLogprobs!)).toEqual([0, 0, 0, 0, 0, -2]);
    expect(a.ceWeights).toBeUndefined(); // nobody carries ce: absent, not zeros
  });

  test("rows of plain rl samples keep every stream absent (the hot path)", () => {
    const row = packStep([grpo(1, 2, 2), grpo(2, 3, 1)], { seqLen: 16 }).rows[0]!;
    expect([row.rlWeights, row.ceWeights, row.refKlWeights, row.refLogprobs]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });

  test("padding is its own segment with weight 0 in every stream", () => {
    const step = packStep([sft(1, 2, 3), echo(2, 2, 3)], { seqLen: 64, padMultiple: 8, padTokenId: 7 });
    const row = step.rows[0]!;
    expect(row.tokenIds.length).toBe(16);
    expect(Array.from(row.sampleLengths)).toEqual([5, 5, 6]);
    const pad = (a: ArrayLike<number>) => Array.from(a).slice(10);
    for (const stream of [row.rlWeights!, row.ceWeights!, row.lossMask, row.advantages])
      expect(pad(stream)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(pad(row.tokenIds)).toEqual([7, 7, 7, 7, 7, 7]);
    expect(pad(row.envIndex)).toEqual([-1, -1, -1, -1, -1, -1]);
    expect(pad(row.temperatures)).toEqual([1, 1, 1, 1, 1, 1]);
    expect(step.tokens).toBe(10);
  });

  test("longer samples are truncated, never split, with every array cut", () => {
    const step = packStep([opd(1, 3, 7), grpo(2, 1, 1)], { seqLen: 6 });
    expect(step.truncatedSamples).toBe(1);
    const row = step.rows.find((r) => r.samples[0]!.rolloutId === "r1")!;
    expect(row.samples[0]).toMatchObject({ length: 6, originalLength: 10 });
    expect(Array.from(row.tokenIds)).toEqual([100, 101, 102, 103, 104, 105]);
    expect(Array.from(row.refKlWeights!)).toEqual([0, 0, 0, 1, 1, 1]);
    expect(step.counts.refKl).toBe(3);
  });

  test("member counts over the whole step, without each sample's first token", () => {
    const first = sample(9, 0, 3); // an action at position 0 has no prediction: not a member
    const step = packStep([grpo(1, 2, 3), opd(2, 2, 2), sft(3, 1, 2), echo(4, 3, 1), first], { seqLen: 8 });
    expect(step.rows.length).toBeGreaterThan(1);
    // rl: grpo 3 + echo 1 + first 2 (three samples); ce: sft 2 + echo 1; ref_kl: opd 2
    expect(step.counts).toEqual({ rl: 6, ce: 3, refKl: 2, distill: 0, rlSequences: 3 });
    const perRow = step.rows.map(rowCounts);
    expect(perRow.reduce((a, c) => a + c.rl + c.ce + c.refKl, 0)).toBe(11);
  });
});
