// `rlx serve` with a LoRA adapter (docs/lora.md): started on an adapter directory it serves base +
// adapter unmerged with the adapter's logprobs; `/update_weights` of another adapter for the same
// base copies only the adapter in (`adapter_only: true`, the new version's logprobs), with a
// request streaming, and no prompt after it reuses K/V the old adapter computed (the prompts share
// 32 tokens); full weights reload as a whole model; an adapter whose tensors do not fit is a 400
// naming path that leaves the old adapter serving.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OpenAIClient } from "../../src/clients/client.ts";
import type { Completion } from "../../src/clients/types.ts";
import { loadModel, saveModel } from "../../src/model/hf.ts";
import { score } from "../../src/native/generate.ts";
import type { NativeModel } from "../../src/native/model.ts";
import { rng } from "../native/tiny_model.ts";
import { microModelDir } from "../fixtures/serve_model.ts";
import { type ServeProcess, startServe } from "./serve_harness.ts";

const KEY = "lora-key";
const run = mkdtempSync(join(tmpdir(), "rlx-serve-lora-"));
const base = join(run, "base");
const weights = (step: number) => join(run, "weights", `step_${step}`);
let serve: ServeProcess;
const models = new Map<number, NativeModel>();

/** Writes an adapter of the base with random A and B as weights/step_N (PEFT layout). */
async function writeAdapter(step: number, rank = 4): Promise<void> {
  using model = await loadModel(base);
  model.addLora({ rank, alpha: 8, dropout: 0, targets: ["q_proj", "v_proj", "down_proj"] }, step);
  const rand = rng(step);
  for (const p of model.loraParams()) {
    const n = p.shape.reduce((a, b) => a * b, 1);
    model.setParam(
      p.name,
      Float32Array.from({ length: n }, () => (rand() - 0.5) * 0.4),
      "f32",
      p.shape,
    );
  }
  saveModel(model, weights(step), { dtype: "f32", sourceDir: base });
}

beforeAll(async () => {
  await microModelDir({ seed: 4, sharpen: 4, dir: base });
  for (const step of [0, 1]) {
    await writeAdapter(step);
    models.set(step, await loadModel(weights(step)));
  }
  await writeAdapter(7, 2); // another rank: not applicable in place
  await microModelDir({ seed: 9, dir: weights(2) }); // full weights
  models.set(2, await loadModel(weights(2)));
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
    "--reload-mode",
    "in-flight",
  ]);
});

afterAll(async () => {
  for (const m of models.values()) m.free();
  if (serve) expect(await serve.stop()).toBe(0);
  rmSync(run, { recursive: true, force: true });
});

const client = () =>
  new OpenAIClient({ model: "policy", baseUrls: [`${serve.url}/v1`], apiKey: KEY, timeoutMs: 30_000 });
/** Every prompt begins with these (a system prompt's worth): a later request continues a slot's kept K/V. */
const SHARED = Array.from({ length: 32 }, (_, t) => 5 + ((t * 7) % 50));
const request = (i: number) => ({
  promptIds: [...SHARED, 3, 1 + i, 4],
  maxTokens: 10,
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

async function update(path: string, version: number): Promise<Response> {
  return fetch(`${serve.url}/update_weights`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ path, version }),
  });
}

test("started on an adapter directory, the server serves base + adapter with its logprobs", async () => {
  const c = await client().complete(request(1));
  expect(c.policyVersion).toBe(0);
  expect(c.tokenIds.length).toBeGreaterThan(0);
  expectVersionLogprobs(c, 1);
});

test("/update_weights of an adapter moves only the adapter; the new version's logprobs follow", async () => {
  const pending = client().complete(request(2));
  const response = await update(weights(1), 1);
  expect(response.status).toBe(200);
  expect(await response.json()).toMatchObject({ status: "ok", policy_version: 1, adapter_only: true });
  await pending;
  for (const i of [3, 4]) {
    const c = await client().complete(request(i));
    expect(c.policyVersion).toBe(1);
    expectVersionLogprobs(c, i);
  }
});

test("an adapter whose tensors do not fit is a 400 naming path; the old adapter keeps serving", async () => {
  // rank-2 tensors under a config that claims rank 4 (the served settings): caught before any copy
  const config = join(weights(7), "adapter_config.json");
  writeFileSync(config, JSON.stringify({ ...JSON.parse(readFileSync(config, "utf8")), r: 4 }));
  const response = await update(weights(7), 5);
  expect(response.status).toBe(400);
  const body = (await response.json()) as { param: string; message: string };
  expect(body.param).toBe("path");
  expect(body.message).toMatch(/has shape \[2,\d+\], the model's is \[4,\d+\]/);
  const c = await client().complete(request(6));
  expect(c.policyVersion).toBe(1);
  expectVersionLogprobs(c, 6);
});

test("full weights reload as a whole model (adapter_only false)", async () => {
  const response = await update(weights(2), 2);
  expect(response.status).toBe(200);
  expect(await response.json()).toMatchObject({ policy_version: 2, adapter_only: false });
  const c = await client().complete(request(5));
  expect(c.policyVersion).toBe(2);
  expectVersionLogprobs(c, 5);
});
