// rlx serve's access rules, in-process on a micro model (docs/serve.md, "Security"): with an API
// key every route but /health answers 401 without `Authorization: Bearer KEY` (GET /metrics's
// numbers are checked here too); a policy server
// loads weights only from under its weights root (403 outside it, a symlink pointing out included),
// and the orchestrator's own client, given the key, reaches everything.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isLoopback, isUnderRoot } from "../../../src/serve/auth.ts";
import { OpenAIClient } from "../../../src/clients/client.ts";
import { policyEngine } from "../../../src/clients/policy_engines.ts";
import { Engine } from "../../../src/engine/engine.ts";
import { type RunningServer, startServer } from "../../../src/serve/server.ts";
import { loadModel } from "../../../src/model/hf.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";
import { microModelDir } from "../../fixtures/serve_model.ts";

const KEY = "s3cret-key";
const run = mkdtempSync(join(tmpdir(), "rlx-auth-"));
const root = join(run, "weights");
let server: RunningServer;

beforeAll(async () => {
  const dir = await microModelDir({ dir: join(root, "step_0") });
  await microModelDir({ dir: join(run, "elsewhere"), seed: 3 });
  mkdirSync(join(root, "sneaky"));
  symlinkSync(join(run, "elsewhere"), join(root, "sneaky", "link"));
  const engine = new Engine(await loadModel(dir), { maxBatch: 2, maxModelLen: 64 });
  server = startServer({
    engine,
    tokenizer: Tokenizer.load(dir),
    modelName: "micro",
    port: 0,
    policy: true,
    apiKey: KEY,
    weightsRoot: root,
  });
});

afterAll(async () => {
  await server?.drain();
});

const post = (path: string, body: unknown, key?: string) =>
  fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify(body),
  });

test("every route but /health needs the key: none or a wrong one is a 401 with vLLM's error body", async () => {
  expect((await fetch(`${server.url}/health`)).status).toBe(200);
  const routes: Array<[string, unknown]> = [
    ["/v1/completions", { prompt: [1, 2], max_tokens: 2 }],
    ["/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 2 }],
    ["/tokenize", { prompt: "hi" }],
    ["/detokenize", { tokens: [1] }],
    ["/update_weights", { path: join(root, "step_0"), version: 1 }],
    ["/no/such/route", {}],
  ];
  for (const [path, body] of routes) {
    for (const key of [undefined, "wrong", `${KEY}x`]) {
      const response = await post(path, body, key);
      expect(response.status).toBe(401);
      expect(await response.json()).toMatchObject({ type: "AuthenticationError", code: 401 });
    }
  }
  for (const path of ["/v1/models", "/metrics"]) expect((await fetch(`${server.url}${path}`)).status).toBe(401);
  expect(server.ctx.engine.version).toBe(0); // no update went through
  // with the key, the same requests are served
  expect((await post("/tokenize", { prompt: "hi" }, KEY)).status).toBe(200);
  expect((await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } })).status).toBe(200);
});

test("GET /metrics: the load and the K/V cache's budget and use in Prometheus' text format", async () => {
  const client = new OpenAIClient({ model: "micro", baseUrls: [`${server.url}/v1`], apiKey: KEY, retries: 0 });
  const completion = await client.complete({
    promptIds: [3, 4, 5],
    maxTokens: 3,
    temperature: 1,
    topP: 1,
    topK: 0,
    stop: [],
  });
  const response = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${KEY}` } });
  expect(response.headers.get("content-type")).toStartWith("text/plain");
  const lines = (await response.text()).split("\n").filter((l) => l && !l.startsWith("#"));
  const value = Object.fromEntries(lines.map((l) => [l.split(" ")[0]!, Number(l.split(" ")[1])]));
  expect(value).toMatchObject({
    rlx_requests_running: 0,
    rlx_requests_waiting: 0,
    rlx_kv_budget_tokens: 2 * 64, // max batch x max model len, the default
    rlx_kv_running_tokens: 0,
    rlx_kv_reserved_tokens: 0,
    rlx_kv_kept_tokens: 16, // the finished request's 5 cached tokens, kept for a next turn
    rlx_kv_usage_ratio: 0,
  });
  // at least one token, and every one the completion returned: sampling may stop before max_tokens
  expect(value.rlx_generation_tokens_total).toBeGreaterThanOrEqual(Math.max(1, completion.tokenIds.length));
  expect(value.rlx_prompt_tokens_total).toBeGreaterThanOrEqual(3);
});

test("/update_weights loads only under the weights root: outside, or through a symlink out, is a 403", async () => {
  for (const path of [join(run, "elsewhere"), join(root, "sneaky", "link"), join(root, "..", "elsewhere"), "/"]) {
    const response = await post("/update_weights", { path, version: 5 }, KEY);
    expect(response.status).toBe(403);
    expect(await response.json()).toMatchObject({ type: "PermissionDeniedError", param: "path" });
  }
  expect(server.ctx.engine.version).toBe(0);
  // a missing directory under the root is the usual 400 naming path
  const missing = await post("/update_weights", { path: join(root, "step_9"), version: 9 }, KEY);
  expect(missing.status).toBe(400);
});

test("the orchestrator's client sends the key: completions and a weight update under the root go through", async () => {
  const client = new OpenAIClient({ model: "micro", baseUrls: [`${server.url}/v1`], apiKey: KEY, retries: 0 });
  const c = await client.complete({ promptIds: [3, 4], maxTokens: 3, temperature: 1, topP: 1, topK: 0, stop: [] });
  expect(c.tokenIds.length).toBeGreaterThan(0);
  await policyEngine("rlx", { model: "micro", baseUrls: [`${server.url}/v1`], apiKey: KEY }).publish(
    join(root, "step_0"),
    1,
  );
  expect(server.ctx.engine.version).toBe(1);
  const keyless = new OpenAIClient({ model: "micro", baseUrls: [`${server.url}/v1`], retries: 0 });
  await expect(
    keyless.complete({ promptIds: [3], maxTokens: 1, temperature: 1, topP: 1, topK: 0, stop: [] }),
  ).rejects.toThrow(/401/);
});

test("loopback addresses are the ones only this machine reaches", () => {
  for (const host of ["127.0.0.1", "127.3.2.1", "localhost", "::1", "[::1]"]) expect(isLoopback(host)).toBe(true);
  for (const host of ["0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "example.com", "128.0.0.1"])
    expect(isLoopback(host)).toBe(false);
  expect(isUnderRoot(join(root, "a", "..", "step_0"), root)).toBe(true);
  expect(isUnderRoot(`${root}-evil`, root)).toBe(false);
});
