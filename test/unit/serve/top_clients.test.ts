// Top-N logprobs through both SamplingClients on a micro model: LocalClient (in-process) and
// OpenAIClient against an in-process `rlx serve` give the same prompt alternatives as the native
// rlx_score_top, and LocalClient.complete with topLogprobs gives a seeded generator's own top-N.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { OpenAIClient } from "../../../src/clients/client.ts";
import { Engine } from "../../../src/engine/engine.ts";
import { LocalClient } from "../../../src/engine/local.ts";
import { type RunningServer, startServer } from "../../../src/serve/server.ts";
import { loadModel } from "../../../src/model/hf.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";
import { NativeGenerator } from "../../../src/native/generate.ts";
import type { NativeModel } from "../../../src/native/model.ts";
import { scoreTop } from "../../../src/native/score_top.ts";
import { microModelDir } from "../../fixtures/serve_model.ts";

let server: RunningServer;
let local: LocalClient;
let model: NativeModel;
const SEQS = [
  [5, 9, 200, 31, 7],
  [1, 2, 3],
];

beforeAll(async () => {
  const dir = await microModelDir({ sharpen: 3 });
  model = await loadModel(dir);
  local = LocalClient.fromModel(model, { maxBatch: 4, maxModelLen: 64 });
  const engine = new Engine(await loadModel(dir), { maxBatch: 2, maxModelLen: 64 });
  server = startServer({ engine, tokenizer: Tokenizer.load(dir), modelName: "micro", port: 0 });
});

afterAll(async () => {
  await server?.drain();
  await local?.close();
  model?.free();
});

test("scoreTop: LocalClient and OpenAIClient over rlx serve equal rlx_score_top", async () => {
  const native = scoreTop(model, SEQS, { k: 4 });
  const want = native.map((s) => ({ logprobs: Array.from(s.logprobs), top: s.top }));
  expect(await local.scoreTop(SEQS, 4)).toEqual(want);
  // The HTTP client sends one request per sequence: each is scored alone in its own packed row.
  const alone = SEQS.map((seq) => scoreTop(model, [seq], { k: 4 })[0]!);
  const wantAlone = alone.map((s) => ({ logprobs: Array.from(s.logprobs), top: s.top }));
  const http = new OpenAIClient({ model: "micro", baseUrls: [`${server.url}/v1`] });
  expect(await http.scoreTop(SEQS, 4)).toEqual(wantAlone);
  expect(await http.score(SEQS)).toEqual(wantAlone.map((s) => s.logprobs));
});

test("LocalClient.complete with topLogprobs: the seeded generator's top-N per token", async () => {
  const request = { promptIds: SEQS[0]!, maxTokens: 5, temperature: 0.9, topP: 1, topK: 0, stop: [], seed: 8 };
  const out = await local.complete({ ...request, topLogprobs: 3 });
  const plain = await local.complete(request);
  expect(plain.topLogprobs).toBeUndefined();
  expect(plain.tokenIds).toEqual(out.tokenIds);
  using gen = NativeGenerator.create(model, { slots: 1, capacity: 64 });
  let produced = gen.add([{ prompt: SEQS[0]!, sampling: { temperature: 0.9, maxNewTokens: 5, seed: 8 } }]);
  const tops = [];
  while (produced.length > 0) {
    tops.push(gen.topLogprobs(1, 3)[0]!);
    if (produced[0]!.finish) break;
    produced = gen.step();
  }
  expect(out.topLogprobs).toEqual(tops);
});

test("requests with different N share a batch: each gets its own N of the same alternatives", async () => {
  const base = { promptIds: SEQS[1]!, maxTokens: 4, temperature: 1, topP: 1, topK: 0, stop: [] };
  const [five, none, two] = await Promise.all([
    local.complete({ ...base, seed: 3, topLogprobs: 5 }),
    local.complete({ ...base, seed: 4 }),
    local.complete({ ...base, seed: 3, topLogprobs: 2 }),
  ]);
  expect(none!.topLogprobs).toBeUndefined();
  expect(two!.tokenIds).toEqual(five!.tokenIds);
  expect(five!.topLogprobs!.every((t) => t.ids.length === 5)).toBe(true);
  expect(two!.topLogprobs).toEqual(
    five!.topLogprobs!.map((t) => ({ ids: t.ids.slice(0, 2), logprobs: t.logprobs.slice(0, 2), rank: t.rank })),
  );
  await expect(local.complete({ ...base, topLogprobs: 21 })).rejects.toThrow(
    /logprobs = 21 must be an integer in 0..20/,
  );
});
