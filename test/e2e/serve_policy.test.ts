// A policy server under load, through the orchestrator's own client (src/clients/client.ts):
// weights published as HF directories are loaded with /update_weights while requests stream in;
// no request fails, every completion reports the version that produced it, and its logprobs are
// that version's (scored against the published weights). Also: the client's retries ride out the
// server's 429 backpressure, and a bad weights path is a 400 that leaves the old weights serving.
// The server runs as `rlx train` starts it: an API key, and weights only from the run's weights/.
// Over its weight channel (POST /weight_channel, this process as the trainer) a transfer is served
// exactly as the same weights loaded from disk: the same greedy tokens, the same logprobs.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OpenAIClient } from "../../src/clients/client.ts";
import { policyEngine } from "../../src/clients/policy_engines.ts";
import type { Completion } from "../../src/clients/types.ts";
import { loadModel } from "../../src/model/hf.ts";
import { score } from "../../src/native/generate.ts";
import type { NativeModel } from "../../src/native/model.ts";
import { microModelDir } from "../fixtures/serve_model.ts";
import { type ServeProcess, startServe } from "./serve_harness.ts";
import { freePort, until } from "./train_helpers.ts";
import { ProcessGroup } from "../../src/native/dist.ts";
import { sendWeights } from "../../src/native/weights.ts";

const KEY = "policy-key";
const run = mkdtempSync(join(tmpdir(), "rlx-policy-"));
const weights = (step: number) => join(run, "weights", `step_${step}`);
let serve: ServeProcess;
const models = new Map<number, NativeModel>();

beforeAll(async () => {
  for (const step of [0, 1, 2]) {
    await microModelDir({ seed: 10 + step, dir: weights(step) });
    models.set(step, await loadModel(weights(step)));
  }
  serve = await startServe([
    "--model",
    weights(0),
    "--served-model-name",
    "policy",
    "--policy",
    "--weights-root",
    join(run, "weights"),
    "--api-key",
    KEY,
    "--max-batch",
    "4",
    "--max-model-len",
    "128",
    "--max-queue",
    "6",
  ]);
});

afterAll(async () => {
  for (const m of models.values()) m.free();
  if (serve) expect(await serve.stop()).toBe(0);
});

const client = () =>
  new OpenAIClient({
    model: "policy",
    baseUrls: [`${serve.url}/v1`],
    apiKey: KEY,
    backoffMs: 5,
    retries: 50,
    timeoutMs: 30_000,
  });
const request = (i: number) => ({
  promptIds: [3, 1 + (i % 250), 4],
  maxTokens: 12,
  temperature: 1,
  topP: 1,
  topK: 0,
  stop: [],
  seed: i,
});

function expectVersionLogprobs(c: Completion, i: number): void {
  const prompt = request(i).promptIds;
  const ref = score(models.get(c.policyVersion)!, [[...prompt, ...c.tokenIds]]).logprobs[0]!;
  c.logprobs.forEach((lp, j) => expect(Math.abs(lp - ref[prompt.length + j]!)).toBeLessThan(1e-4));
}

test("/update_weights mid-load: no request fails, versions are reported and match the logprobs", async () => {
  const policy = client();
  const seen: Array<Array<{ i: number; c: Completion }>> = [[], [], []];
  let stop = false;
  let sent = 0;
  const workers = [0, 1, 2].map(async (w) => {
    while (!stop) {
      const i = sent++;
      const c = await policy.complete(request(i));
      expectVersionLogprobs(c, i);
      seen[w]!.push({ i, c });
    }
  });
  // Each phase lasts until a request sent after it began has completed, however slow the machine
  // (a worker's failure ends the wait with its error).
  const completedFrom = (first: number) =>
    Promise.race([
      until(() => seen.flat().some((d) => d.i >= first), 60_000, `request ${first}`),
      Promise.all(workers),
    ]);
  await completedFrom(0);
  const publish = (dir: string, version: number) =>
    policyEngine("rlx", { model: "policy", baseUrls: [`${serve.url}/v1`], apiKey: KEY }).publish(dir, version);
  await publish(weights(1), 1);
  await completedFrom(sent);
  await publish(weights(2), 2);
  const afterLast = sent;
  await completedFrom(afterLast);
  stop = true;
  await Promise.all(workers);
  for (const list of seen) {
    const versions = list.map((d) => d.c.policyVersion);
    expect(versions).toEqual([...versions].sort((a, b) => a - b)); // never goes back
  }
  const all = seen.flat();
  expect(all.some((d) => d.c.policyVersion === 0)).toBe(true);
  // a request sent once /update_weights answered is admitted on the new weights
  const late = all.filter((d) => d.i >= afterLast);
  expect(late.length).toBeGreaterThan(0);
  for (const d of late) expect(d.c.policyVersion).toBe(2);
  expect((await policy.modelInfo()).policyVersion).toBe(2);
}, 120_000);

test("the client's retries ride out 429 backpressure from a full queue", async () => {
  const policy = client();
  const results = await Promise.all(Array.from({ length: 24 }, (_, i) => policy.complete(request(i))));
  expect(results.every((c) => c.tokenIds.length > 0)).toBe(true);
}, 60_000);

test("a weights path that does not load is a 400 naming path; the old weights keep serving", async () => {
  const response = await fetch(`${serve.url}/update_weights`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ path: join(run, "weights", "missing"), version: 9 }),
  });
  expect(response.status).toBe(400);
  expect(((await response.json()) as { param: string }).param).toBe("path");
  const c = await client().complete(request(1));
  expect(c.policyVersion).toBe(2);
  expectVersionLogprobs(c, 1);
});

const post = (path: string, body: unknown, key = KEY) =>
  fetch(`${serve.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });

test("the weight channel: a wrong key is refused; a transfer is served as the same step loaded from disk", async () => {
  expect((await post("/weight_channel", { host: "127.0.0.1", port: 1 }, "wrong")).status).toBe(401);
  const noChannel = await post("/update_weights", { version: 5, transfer: "c10d" });
  expect(noChannel.status).toBe(400);
  expect(await noChannel.text()).toContain("POST /weight_channel first");
  const noPort = await post("/weight_channel", { host: "127.0.0.1" });
  expect(((await noPort.json()) as { param: string }).param).toBe("port");
  const badLora = await post("/weight_channel", { host: "127.0.0.1", port: 1, lora: { rank: 4 } });
  expect(((await badLora.json()) as { param: string }).param).toBe("lora");

  // this process is the trainer: it serves the channel's store and sends step 1's weights as version 5
  const port = freePort();
  expect((await post("/weight_channel", { host: "127.0.0.1", port, timeout_ms: 20_000 })).status).toBe(200);
  using channel = await ProcessGroup.create({
    rank: 0,
    worldSize: 2,
    store: { type: "tcp", host: "127.0.0.1", port },
    timeoutMs: 20_000,
  });
  const received = post("/update_weights", { version: 5, transfer: "c10d" });
  await Bun.sleep(300); // the request on its way before this thread blocks in the send
  expect(sendWeights(models.get(1)!, [channel], { dtype: "f32", version: 5 })).toMatchObject({ failed: [], error: "" });
  expect((await received).status).toBe(200);
  const greedy = { ...request(3), temperature: 0 };
  const overChannel = await client().complete(greedy);
  expect(overChannel.policyVersion).toBe(5);
  expect((await post("/update_weights", { path: weights(1), version: 6 })).status).toBe(200);
  const fromDisk = await client().complete(greedy);
  expect(fromDisk.policyVersion).toBe(6);
  expect([overChannel.tokenIds, overChannel.logprobs]).toEqual([fromDisk.tokenIds, fromDisk.logprobs]);
}, 60_000);
