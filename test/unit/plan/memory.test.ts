// The planner's arithmetic (src/plan/memory.ts) against the layout it models: parameter counts,
// the per-rank share of each state in each shard mode, what checkpointing removes, and the moments
// a step's total is taken from.
import { expect, test } from "bun:test";
import { countParams, getPreset } from "../../../src/model/presets.ts";
import { attentionBytes, chunkTokens, layerActivationBytes } from "../../../src/plan/activations.ts";
import { type PlanInput, planMemory, planRow, RUNTIME_BYTES, unitsOf } from "../../../src/plan/memory.ts";

const QWEN3_06B = getPreset("qwen3-0.6b").config.shim;
const input = (over: Partial<PlanInput> = {}): PlanInput => ({
  shape: QWEN3_06B,
  seqLen: 2048,
  ranks: 2,
  device: "cpu",
  attention: "blocked",
  fileBytesPerParam: 2,
  ...over,
});

test("the units add up to the model's parameter count, tied and untied", () => {
  expect(unitsOf(QWEN3_06B).params).toBe(countParams(QWEN3_06B));
  const untied = { ...QWEN3_06B, tie_word_embeddings: false };
  expect(unitsOf(untied).params).toBe(countParams(untied));
  expect(unitsOf(untied).head).toBe(QWEN3_06B.vocab_size * QWEN3_06B.hidden_size + QWEN3_06B.hidden_size);
});

test("each mode keeps its share of weights, gradients and AdamW state", () => {
  const P = countParams(QWEN3_06B);
  const [none, , optimizer, , full] = planMemory(input({ ranks: 4 }));
  expect([none!.weights, none!.gradients, none!.optimizer]).toEqual([4 * P, 4 * P, 8 * P]);
  expect([optimizer!.weights, optimizer!.gradients, optimizer!.optimizer]).toEqual([4 * P, 4 * P, (12 * P) / 4]);
  expect([full!.weights, full!.gradients, full!.optimizer]).toEqual([P, P, 2 * P]);
  expect(full!.checkpointing).toBe(true);
});

test("checkpointing keeps one [T, hidden] input a layer instead of every saved tensor", () => {
  const off = planRow(input(), "none", false);
  const on = planRow(input(), "none", true);
  const layer = layerActivationBytes(QWEN3_06B, 2048, "blocked");
  expect(off.activations - on.activations).toBe(28 * (layer - 4 * 2048 * 1024));
  expect(on.total).toBeLessThan(off.total);
});

test("blocked attention keeps the causal half of the probabilities; sdpa none", () => {
  // one block of n <= 256 queries: [heads, n, n] float32 and an [n, n] mask
  expect(attentionBytes(QWEN3_06B, 200, "blocked")).toBe(200 * 200 * (4 * 16 + 1));
  // 2048 tokens: 8 blocks of 256 with 256, 512, ..., 2048 keys
  expect(attentionBytes(QWEN3_06B, 2048, "blocked")).toBe(256 * 256 * 36 * (4 * 16 + 1));
  expect(attentionBytes(QWEN3_06B, 2048, "sdpa")).toBe(0);
});

test("the LM head chunk follows native/src/model.h chunk_tokens()", () => {
  expect(chunkTokens(151936, "cpu")).toBe(48);
  expect(chunkTokens(151936, "cuda")).toBe(220);
  expect(chunkTokens(320, "cpu")).toBe(1024);
  expect(chunkTokens(10_000_000, "cuda")).toBe(16);
});

test("the total is the runtime plus the largest moment, at least every state it holds", () => {
  for (const row of planMemory(input())) {
    expect(row.total).toBeGreaterThanOrEqual(row.runtime + row.weights + row.optimizer + row.gradients);
    expect(row.runtime).toBe(RUNTIME_BYTES.cpu);
  }
  // more ranks never cost a "full" rank more, and "full" on 8 ranks is under a quarter of replicated
  const full = (ranks: number) => planRow(input({ ranks }), "full", true).total;
  expect(full(8)).toBeLessThan(full(2));
  expect(full(8)).toBeLessThan(planRow(input(), "none", true).total / 2);
});

test("a large model sharded full peaks while loading: every rank loads it whole in float32", () => {
  const big = {
    ...QWEN3_06B,
    hidden_size: 5120,
    intermediate_size: 25600,
    num_hidden_layers: 64,
    num_attention_heads: 64,
  };
  const row = planRow(input({ shape: big, ranks: 8, device: "cuda", attention: "sdpa" }), "full", true);
  expect(row.peakAt).toBe("load");
  expect(row.total).toBe(RUNTIME_BYTES.cuda + 4 * unitsOf(big).params);
});

test("context parallelism: a rank keeps its share of the row's activations and the whole row's K/V", () => {
  const long = { seqLen: 32768, ranks: 2, attention: "sdpa" as const, device: "cuda" as const };
  const whole = planRow(input(long), "full", true);
  const split = planRow(input({ ...long, contextParallel: 2 }), "full", true);
  // checkpointing keeps each layer's input: [T / C, hidden] a layer
  expect(whole.activations - split.activations).toBe(28 * 4 * (32768 / 2) * 1024 + 4 * 4 * (32768 / 2) * 1024);
  expect(split.stepTotal).toBeLessThan(whole.stepTotal);
});
