// The batching engine and LocalClient on a real micro model: continuous batching (more requests
// than slots, late joiners admitted between decode steps, results equal to running alone), requests
// waiting for K/V blocks within the cache's budget, the bounded queue, cancellation freeing the slot, weight reloads in both modes (drain: running
// sequences finish on the old weights first; in-flight: the swap lands between decode steps and
// running sequences continue on the new weights) with the versions results report, and
// LocalClient's logprobs and scores against the native scoring call.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Engine } from "../../../src/engine/engine.ts";
import type { EngineResult } from "../../../src/engine/engine_api.ts";
import { InvalidRequestError, QueueFullError } from "../../../src/engine/errors.ts";
import { LocalClient } from "../../../src/engine/local.ts";
import { loadModel } from "../../../src/model/hf.ts";
import { score } from "../../../src/native/generate.ts";
import type { NativeModel } from "../../../src/native/model.ts";
import { microModelDir } from "../../fixtures/serve_model.ts";

let dirA: string;
let dirB: string;
let modelA: NativeModel;
let modelB: NativeModel;

beforeAll(async () => {
  dirA = await microModelDir({ seed: 1 });
  dirB = await microModelDir({ seed: 2 });
  modelA = await loadModel(dirA);
  modelB = await loadModel(dirB);
});

afterAll(() => {
  modelA?.free();
  modelB?.free();
});

const sampling = (maxNewTokens: number, seed: number) => ({ temperature: 1, maxNewTokens, seed });
const prompt = (i: number) => [1 + (i % 200), 7, 42, 3 + i];

/** The logprobs the trainer computes for `tokens` after `p`, at temperature 1. */
function trainerLogprobs(model: NativeModel, p: number[], tokens: number[]): number[] {
  return Array.from(score(model, [[...p, ...tokens]]).logprobs[0]!.subarray(p.length));
}

describe("continuous batching", () => {
  test("more requests than slots: all finish, at most maxBatch run at once, results equal running alone", async () => {
    const engine = new Engine(modelA, { maxBatch: 3, maxModelLen: 64, ownsModel: false });
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => engine.submit({ prompt: prompt(i), sampling: sampling(6 + i, 50 + i) })),
    );
    expect(engine.stats.maxRunning).toBe(3);
    expect(engine.stats.admitted).toBe(8);
    for (const [i, r] of results.entries()) {
      expect(r.tokens.length).toBe(6 + i);
      expect(r.finish).toBe("length");
      const alone = new Engine(modelA, { maxBatch: 1, maxModelLen: 64, ownsModel: false });
      expect((await alone.submit({ prompt: prompt(i), sampling: sampling(6 + i, 50 + i) })).tokens).toEqual(r.tokens);
      await alone.close();
    }
    await engine.close();
  });

  test("requests beyond the K/V budget wait for blocks, never exceed it, and decode as they would alone", async () => {
    const engine = new Engine(modelA, { maxBatch: 8, maxModelLen: 128, kvTokens: 160, ownsModel: false });
    const long = (i: number) => Array.from({ length: 60 }, (_, t) => 1 + ((i * 31 + t * 7) % 200));
    const requests = [
      ...[0, 1, 2].map((i) => ({ prompt: long(i), sampling: sampling(60, 80 + i) })), // 8 blocks of 16 each
      ...[3, 4, 5, 6, 7, 8].map((i) => ({ prompt: prompt(i), sampling: sampling(6, 80 + i) })), // 1 block each
    ];
    let peak = 0;
    const watch = () =>
      void (peak = Math.max(peak, engine.cacheStats.kv.runningTokens + engine.cacheStats.kv.reservedTokens));
    const results = await Promise.all(requests.map((r) => engine.submit({ ...r, onToken: watch })));
    expect(engine.cacheStats.kv.budgetTokens).toBe(160);
    expect(peak).toBeLessThanOrEqual(160);
    expect(peak).toBeGreaterThan(128); // a long one ran beside short ones
    expect(engine.stats.maxRunning).toBeLessThan(8);
    const roomy = new Engine(modelA, { maxBatch: 8, maxModelLen: 128, ownsModel: false });
    const alone = await Promise.all(requests.map((r) => roomy.submit(r)));
    results.forEach((r, i) => expect(r.tokens).toEqual(alone[i]!.tokens));
    await Promise.all([engine.close(), roomy.close()]);
    expect(() => new Engine(modelA, { maxBatch: 2, maxModelLen: 128, kvTokens: 100, ownsModel: false })).toThrow(
      /kvTokens must be an integer of at least maxModelLen \(128\)/,
    );
  });

  test("a request that arrives mid-generation joins at the next step and finishes first", async () => {
    const engine = new Engine(modelA, { maxBatch: 4, maxModelLen: 128, ownsModel: false });
    let longTokens = 0;
    let joinedAt = -1;
    const long = engine.submit({ prompt: prompt(0), sampling: sampling(60, 1), onToken: () => void (longTokens += 1) });
    while (longTokens < 5) await Bun.sleep(1);
    const stepsBefore = engine.stats.steps;
    const short = engine.submit({
      prompt: prompt(1),
      sampling: sampling(3, 2),
      onToken: () => void (joinedAt < 0 && (joinedAt = longTokens)),
    });
    const shortResult = await short;
    expect(shortResult.tokens.length).toBe(3);
    expect(longTokens).toBeLessThan(60); // the long one is still running
    expect(joinedAt).toBeGreaterThanOrEqual(5);
    expect(engine.stats.steps - stepsBefore).toBeLessThan(10);
    expect(engine.load.running).toBe(1);
    expect((await long).tokens.length).toBe(60);
    await engine.close();
  });

  test("the queue is bounded: past maxQueue, submit rejects with QueueFullError", async () => {
    const engine = new Engine(modelA, { maxBatch: 1, maxQueue: 2, maxModelLen: 64, ownsModel: false });
    const accepted = [
      engine.submit({ prompt: prompt(0), sampling: sampling(4, 1) }),
      engine.submit({ prompt: prompt(1), sampling: sampling(4, 2) }),
    ];
    expect(engine.canAccept(1)).toBe(false);
    await expect(engine.submit({ prompt: prompt(2), sampling: sampling(4, 3) })).rejects.toBeInstanceOf(QueueFullError);
    expect((await Promise.all(accepted)).map((r) => r.tokens.length)).toEqual([4, 4]);
    expect(engine.canAccept(2)).toBe(true);
    await engine.close();
  });

  test("cancelling a running request frees its slot for the next one; cancelling a queued one removes it", async () => {
    const engine = new Engine(modelA, { maxBatch: 1, maxModelLen: 256, ownsModel: false });
    const abort = new AbortController();
    let produced = 0;
    const running = engine.submit({
      prompt: prompt(0),
      sampling: sampling(200, 1),
      signal: abort.signal,
      onToken: () => void (++produced === 3 && abort.abort()),
    });
    const queuedAbort = new AbortController();
    const queued = engine.submit({ prompt: prompt(1), sampling: sampling(5, 2), signal: queuedAbort.signal });
    const next = engine.submit({ prompt: prompt(2), sampling: sampling(5, 3) });
    queuedAbort.abort();
    const [r, q, n] = await Promise.all([running, queued, next]);
    expect(r.finish).toBe("abort");
    expect(r.tokens.length).toBe(3);
    expect(q).toEqual({ tokens: [], logprobs: [], finish: "abort", version: 0, versionEnd: 0 });
    expect(n.tokens.length).toBe(5);
    expect(engine.load).toEqual({ running: 0, queued: 0 });
    await engine.close();
  });

  test("onToken returning true ends the sequence there with finish stop", async () => {
    const engine = new Engine(modelA, { maxBatch: 2, maxModelLen: 64, ownsModel: false });
    let count = 0;
    const r = await engine.submit({ prompt: prompt(0), sampling: sampling(30, 1), onToken: () => ++count === 4 });
    expect(r.finish).toBe("stop");
    expect(r.tokens.length).toBe(4);
    await engine.close();
  });

  test("invalid requests are refused naming the field", async () => {
    const engine = new Engine(modelA, { maxBatch: 1, maxModelLen: 32, ownsModel: false });
    const refused = async (p: number[], n: number, seed = 1) => {
      const err = await engine.submit({ prompt: p, sampling: sampling(n, seed) }).catch((e) => e);
      expect(err).toBeInstanceOf(InvalidRequestError);
      return (err as InvalidRequestError).param;
    };
    expect(await refused([], 4)).toBe("prompt");
    expect(await refused([1, 320], 4)).toBe("prompt");
    expect(await refused([1, -1], 4)).toBe("prompt");
    expect(await refused(Array(32).fill(1), 1)).toBe("prompt");
    expect(await refused([1, 2], 31)).toBe("max_tokens");
    expect(await refused([1, 2], 0)).toBe("max_tokens");
    // refused here, not by the shim in the middle of an admit (which would fail the whole batch)
    for (const seed of [-1, 0.5, 2 ** 53]) expect(await refused([1, 2], 4, seed)).toBe("seed");
    expect((await engine.submit({ prompt: [1, 2], sampling: sampling(30, 1) })).tokens.length).toBe(30);
    await engine.close();
  });
});

const checkLogprobs = (r: EngineResult, model: NativeModel, p: number[], upTo = r.tokens.length) => {
  const ref = trainerLogprobs(model, p, r.tokens);
  r.logprobs.slice(0, upTo).forEach((lp, j) => expect(Math.abs(lp - ref[j]!)).toBeLessThan(1e-4));
};

describe("weight reloads", () => {
  test("drain (default): running sequences finish on the old weights before the swap, later ones use the new", async () => {
    const engine = new Engine(await loadModel(dirA), { maxBatch: 2, maxModelLen: 128 });
    expect(engine.reloadMode).toBe("drain");
    let started = 0;
    const events: string[] = [];
    const before = Array.from({ length: 2 }, (_, i) =>
      engine
        .submit({ prompt: prompt(i), sampling: sampling(20, i), onToken: () => void started++ })
        .then((r) => (events.push("before"), r)),
    );
    while (started < 2) await Bun.sleep(1);
    const reload = engine.reloadWeights(dirB, 7).then(() => void events.push("reload"));
    const after = Array.from({ length: 2 }, (_, i) => engine.submit({ prompt: prompt(i), sampling: sampling(20, i) }));
    await reload;
    expect(events).toEqual(["before", "before", "reload"]);
    expect(engine.version).toBe(7);
    (await Promise.all(before)).forEach(
      (r, i) => (expect([r.version, r.versionEnd]).toEqual([0, 0]), checkLogprobs(r, modelA, prompt(i))),
    );
    (await Promise.all(after)).forEach(
      (r, i) => (expect([r.version, r.versionEnd]).toEqual([7, 7]), checkLogprobs(r, modelB, prompt(i))),
    );
    await engine.close();
  });

  test("in-flight: the reload lands between decode steps without waiting for a long sequence, which finishes on the new weights", async () => {
    const engine = new Engine(await loadModel(dirA), { maxBatch: 2, maxModelLen: 256, reloadMode: "in-flight" });
    let longTokens = 0;
    const long = engine.submit({ prompt: prompt(0), sampling: sampling(150, 1), onToken: () => void longTokens++ });
    while (longTokens < 3) await Bun.sleep(1);
    let tokensAtSwap = -1;
    const reload = engine.reloadWeights(dirB, 7).then(() => void (tokensAtSwap = longTokens));
    // Queued behind nothing: admitted at once on the new weights, not after the long sequence.
    let shortDoneAt = -1;
    const short = engine
      .submit({ prompt: prompt(1), sampling: sampling(8, 2) })
      .then((r) => ((shortDoneAt = longTokens), r));
    await reload;
    expect(engine.version).toBe(7);
    expect(tokensAtSwap).toBeGreaterThanOrEqual(3);
    expect(tokensAtSwap).toBeLessThan(150);
    const s = await short;
    expect(shortDoneAt).toBeLessThan(150);
    expect([s.version, s.versionEnd]).toEqual([7, 7]);
    checkLogprobs(s, modelB, prompt(1));
    const r = await long;
    expect(r.finish).toBe("length");
    expect(r.tokens.length).toBe(150);
    // The admission version (the oldest weights that produced a token) and the newest.
    expect([r.version, r.versionEnd]).toEqual([0, 7]);
    // Tokens before the swap are the old model's exactly; after it they are sampled by the new
    // weights over the old K/V, which neither model's scoring reproduces.
    checkLogprobs(r, modelA, prompt(0), tokensAtSwap);
    const underA = trainerLogprobs(modelA, prompt(0), r.tokens);
    const moved = r.logprobs
      .slice(tokensAtSwap)
      .filter((lp, j) => Math.abs(lp - underA[tokensAtSwap + j]!) > 1e-3).length;
    expect(moved).toBeGreaterThan((150 - tokensAtSwap) / 2);
    await engine.close();
  });

  test("in-flight: a directory that does not load leaves the running sequence on the old weights", async () => {
    const engine = new Engine(await loadModel(dirA), { maxBatch: 1, maxModelLen: 128, reloadMode: "in-flight" });
    let tokens = 0;
    const running = engine.submit({ prompt: prompt(0), sampling: sampling(40, 1), onToken: () => void tokens++ });
    while (tokens < 2) await Bun.sleep(1);
    await expect(engine.reloadWeights("/nonexistent/weights", 1)).rejects.toThrow();
    const r = await running;
    expect([r.version, r.versionEnd, engine.version]).toEqual([0, 0, 0]);
    checkLogprobs(r, modelA, prompt(0));
    await engine.close();
  });

  test("a directory that does not load leaves the old weights serving", async () => {
    const engine = new Engine(await loadModel(dirA), { maxBatch: 1, maxModelLen: 64 });
    await expect(engine.reloadWeights("/nonexistent/weights", 1)).rejects.toThrow();
    expect(engine.version).toBe(0);
    const r = await engine.submit({ prompt: prompt(0), sampling: sampling(5, 1) });
    expect(r.version).toBe(0);
    trainerLogprobs(modelA, prompt(0), r.tokens).forEach((lp, j) =>
      expect(Math.abs(lp - r.logprobs[j]!)).toBeLessThan(1e-4),
    );
    await engine.close();
  });
});

describe("LocalClient", () => {
  test("complete: stop token included, trainer logprobs at the sampling temperature, version", async () => {
    await using client = await LocalClient.fromModelDir(dirA, { maxBatch: 4, maxModelLen: 128 });
    const base = await client.complete({
      promptIds: prompt(0),
      maxTokens: 12,
      temperature: 0.8,
      topP: 0.95,
      topK: 0,
      stop: [],
      seed: 3,
    });
    expect(base.tokenIds.length).toBe(12);
    const ref = Array.from(
      score(modelA, [[...prompt(0), ...base.tokenIds]], { temperature: 0.8 }).logprobs[0]!.subarray(prompt(0).length),
    );
    base.logprobs.forEach((lp, j) => expect(Math.abs(lp - ref[j]!)).toBeLessThan(1e-4));
    const stop = base.tokenIds[5]!;
    const stopped = await client.complete({
      promptIds: prompt(0),
      maxTokens: 12,
      temperature: 0.8,
      topP: 0.95,
      topK: -1,
      stop: [stop],
      seed: 3,
    });
    expect(stopped.tokenIds).toEqual(base.tokenIds.slice(0, base.tokenIds.indexOf(stop) + 1));
    expect(stopped.finishReason).toBe("stop");
    expect(stopped.policyVersion).toBe(0);
  });

  test("score equals the native scoring call; concurrent completes share batches", async () => {
    await using client = await LocalClient.fromModelDir(dirA, { maxBatch: 8, maxModelLen: 64 });
    const seqs = [prompt(1), [...prompt(2), 9, 9, 9]];
    const ref = score(modelA, seqs).logprobs.map((lp) => Array.from(lp));
    expect(await client.score(seqs)).toEqual(ref);
    await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        client.complete({ promptIds: prompt(i), maxTokens: 4, temperature: 1, topP: 1, topK: 0, stop: [], seed: i }),
      ),
    );
    expect(client.engine.stats.maxRunning).toBe(8);
  });

  test("updateWeights switches the served version", async () => {
    await using client = await LocalClient.fromModelDir(dirA, { maxBatch: 2, maxModelLen: 64 });
    await client.updateWeights(dirB, 3);
    const out = await client.complete({
      promptIds: prompt(0),
      maxTokens: 4,
      temperature: 1,
      topP: 1,
      topK: 0,
      stop: [],
      seed: 1,
    });
    expect(out.policyVersion).toBe(3);
    expect(await client.score([prompt(0)])).toEqual([Array.from(score(modelB, [prompt(0)]).logprobs[0]!)]);
  });
});
