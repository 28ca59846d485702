// rlx serve's robustness, in-process on a micro model: a table of malformed requests, each
// answered 4xx with vLLM's error body naming the field, the server healthy and serving after all
// of them; a client that disconnects mid-generation (streamed or not) frees its slot; a full
// queue answers 429.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Engine } from "../../../src/engine/engine.ts";
import { type RunningServer, startServer } from "../../../src/serve/server.ts";
import { loadModel } from "../../../src/model/hf.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";
import { microModelDir } from "../../fixtures/serve_model.ts";

let server: RunningServer;

beforeAll(async () => {
  const dir = await microModelDir();
  const engine = new Engine(await loadModel(dir), { maxBatch: 1, maxModelLen: 64, maxQueue: 3 });
  server = startServer({ engine, tokenizer: Tokenizer.load(dir), modelName: "micro", port: 0 });
});

afterAll(async () => {
  await server?.drain();
});

async function call(path: string, body: unknown, method = "POST") {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    ...(method === "POST" ? { body: typeof body === "string" ? body : JSON.stringify(body) } : {}),
  });
  return {
    status: response.status,
    body: (await response.json()) as {
      object: string;
      message: string;
      type: string;
      param: string | null;
      code: number;
    },
  };
}

const ok = { model: "micro", prompt: [1, 2, 3], max_tokens: 4 };
const chat = { model: "micro", messages: [{ role: "user", content: "hi" }], max_tokens: 4 };

// [what, path, body, status, param (the field the error must name; null: none)]
const MALFORMED: [string, string, unknown, number, string | null][] = [
  ["malformed JSON", "/v1/completions", '{"prompt": [1, 2', 400, null],
  ["body is not an object", "/v1/completions", [1, 2, 3], 400, null],
  ["prompt missing", "/v1/completions", { model: "micro", max_tokens: 4 }, 400, "prompt"],
  ["prompt of the wrong type", "/v1/completions", { ...ok, prompt: 5 }, 400, "prompt"],
  ["token id outside the vocabulary", "/v1/completions", { ...ok, prompt: [1, 320] }, 400, "prompt"],
  ["negative token id", "/v1/completions", { ...ok, prompt: [-1] }, 400, "prompt"],
  ["prompt mixes strings and ids", "/v1/completions", { ...ok, prompt: ["a", 1] }, 400, "prompt"],
  ["empty prompt list", "/v1/completions", { ...ok, prompt: [] }, 400, "prompt"],
  ["prompt longer than the context", "/v1/completions", { ...ok, prompt: Array(80).fill(5) }, 400, "prompt"],
  ["prompt + max_tokens over the context", "/v1/completions", { ...ok, max_tokens: 62 }, 400, "max_tokens"],
  ["max_tokens not an integer", "/v1/completions", { ...ok, max_tokens: "ten" }, 400, "max_tokens"],
  ["max_tokens zero", "/v1/completions", { ...ok, max_tokens: 0 }, 400, "max_tokens"],
  ["negative temperature", "/v1/completions", { ...ok, temperature: -0.5 }, 400, "temperature"],
  ["top_p zero", "/v1/completions", { ...ok, top_p: 0 }, 400, "top_p"],
  ["top_p above 1", "/v1/completions", { ...ok, top_p: 1.5 }, 400, "top_p"],
  ["top_k below -1", "/v1/completions", { ...ok, top_k: -2 }, 400, "top_k"],
  ["n zero", "/v1/completions", { ...ok, n: 0 }, 400, "n"],
  ["seed not an integer", "/v1/completions", { ...ok, seed: 1.5 }, 400, "seed"],
  ["stop of the wrong type", "/v1/completions", { ...ok, stop: 5 }, 400, "stop"],
  ["stop_token_ids outside the vocabulary", "/v1/completions", { ...ok, stop_token_ids: [999] }, 400, "stop_token_ids"],
  ["stream not a boolean", "/v1/completions", { ...ok, stream: "yes" }, 400, "stream"],
  ["top-N sampled logprobs past max_logprobs", "/v1/completions", { ...ok, logprobs: 21 }, 400, "logprobs"],
  ["negative logprobs", "/v1/completions", { ...ok, logprobs: -1 }, 400, "logprobs"],
  [
    "top-N prompt logprobs past max_logprobs",
    "/v1/completions",
    { ...ok, prompt_logprobs: 21 },
    400,
    "prompt_logprobs",
  ],
  ["presence_penalty (not implemented)", "/v1/completions", { ...ok, presence_penalty: 0.5 }, 400, "presence_penalty"],
  ["logit_bias (not implemented)", "/v1/completions", { ...ok, logit_bias: { "1": 5 } }, 400, "logit_bias"],
  ["best_of beyond n (no beam search)", "/v1/completions", { ...ok, best_of: 3 }, 400, "best_of"],
  ["echo with stream (not implemented)", "/v1/completions", { ...ok, echo: true, stream: true }, 400, "echo"],
  ["echo not a boolean", "/v1/completions", { ...ok, echo: 1 }, 400, "echo"],
  ["a model this server does not serve", "/v1/completions", { ...ok, model: "gpt-4" }, 404, "model"],
  ["chat without messages", "/v1/chat/completions", { model: "micro" }, 400, "messages"],
  [
    "chat message with an unknown role",
    "/v1/chat/completions",
    { ...chat, messages: [{ role: "wizard", content: "x" }] },
    400,
    "messages",
  ],
  [
    "chat image content",
    "/v1/chat/completions",
    { ...chat, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] },
    400,
    "messages",
  ],
  [
    "chat tools that are not function tools",
    "/v1/chat/completions",
    { ...chat, tools: [{ type: "retrieval" }] },
    400,
    "tools",
  ],
  [
    "chat tool_choice required (needs guided decoding)",
    "/v1/chat/completions",
    { ...chat, tools: [{ type: "function", function: { name: "f" } }], tool_choice: "required" },
    400,
    "tool_choice",
  ],
  [
    "chat assistant tool_calls whose arguments are not JSON",
    "/v1/chat/completions",
    {
      ...chat,
      messages: [
        { role: "user", content: "x" },
        { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "f", arguments: "{" } }] },
      ],
    },
    400,
    "messages",
  ],
  ["tokenize with neither prompt nor messages", "/tokenize", {}, 400, "prompt"],
  [
    "chat top_logprobs past max_logprobs",
    "/v1/chat/completions",
    { ...chat, logprobs: true, top_logprobs: 21 },
    400,
    "top_logprobs",
  ],
  [
    "chat messages longer than the context",
    "/v1/chat/completions",
    { ...chat, messages: [{ role: "user", content: "x".repeat(100) }] },
    400,
    "messages",
  ],
  ["update_weights on a server without --policy", "/update_weights", { path: "/tmp", version: 1 }, 404, null],
  ["detokenize ids outside the vocabulary", "/detokenize", { tokens: [1, 5000] }, 400, "tokens"],
];

describe("malformed requests: 4xx with vLLM's error body naming the field", () => {
  for (const [what, path, body, status, param] of MALFORMED) {
    test(what, async () => {
      const res = await call(path, body);
      expect(res.status).toBe(status);
      expect(res.body.object).toBe("error");
      expect(res.body.code).toBe(status);
      expect(res.body.type).toBe(status === 404 ? "NotFoundError" : "BadRequestError");
      expect(res.body.param).toBe(param);
      if (param !== null) expect(res.body.message).toContain(param === "messages" ? "messages" : param);
    });
  }

  test("wrong method and unknown route", async () => {
    expect((await call("/v1/completions", null, "GET")).status).toBe(405);
    expect((await call("/v1/nothing", {})).status).toBe(404);
  });

  test("after all of them the server is healthy and serves", async () => {
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
    const res = await call("/v1/completions", ok);
    expect(res.status).toBe(200);
    expect((res.body as any).usage.completion_tokens).toBeGreaterThan(0);
  });
});

describe("disconnects and backpressure", () => {
  const engine = () => server.ctx.engine;
  const long = { ...ok, max_tokens: 60, ignore_eos: true };

  /** The engine's load once it is idle, or after 30 s (a slot that is never freed). */
  async function untilIdle() {
    const deadline = performance.now() + 30_000;
    while (performance.now() < deadline && engine().load.running + engine().load.queued > 0) await Bun.sleep(2);
    return engine().load;
  }

  test("a streaming client that disconnects frees its slot", async () => {
    const abort = new AbortController();
    const response = await fetch(`${server.url}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ ...long, stream: true }),
      signal: abort.signal,
    });
    const reader = response.body!.getReader();
    await reader.read();
    const before = engine().stats.generatedTokens;
    abort.abort();
    expect(await untilIdle()).toEqual({ running: 0, queued: 0 });
    expect(engine().stats.generatedTokens - before).toBeLessThan(55);
  });

  test("a non-streaming client that disconnects frees its slot", async () => {
    const abort = new AbortController();
    const pending = fetch(`${server.url}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ ...long, max_tokens: 60 }),
      signal: abort.signal,
    }).catch(() => null);
    for (let i = 0; i < 500 && engine().load.running === 0; i++) await Bun.sleep(1);
    const before = engine().stats.generatedTokens;
    abort.abort();
    await pending;
    expect(await untilIdle()).toEqual({ running: 0, queued: 0 });
    expect(engine().stats.generatedTokens - before).toBeLessThan(55);
  });

  test("a full queue answers 429 and the accepted requests still complete", async () => {
    const requests = Array.from({ length: 6 }, () => call("/v1/completions", { ...ok, max_tokens: 20 }));
    const statuses = (await Promise.all(requests)).map((r) => r.status);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(3);
    expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
    const rejected = await call("/v1/completions", { ...ok, n: 4 });
    expect(rejected.status).toBe(400);
    expect(rejected.body.param).toBe("n");
  });

  test("a streaming request to a full queue gets a 429 status, not a 200 with an error event", async () => {
    const abort = new AbortController();
    const fill = (i: number) =>
      engine().submit({ prompt: [1, 2, 3], sampling: { maxNewTokens: 60, seed: i }, signal: abort.signal });
    const held = [fill(0)];
    while (engine().load.running === 0) await Bun.sleep(1);
    held.push(fill(1), fill(2), fill(3));
    expect(engine().canAccept(1)).toBe(false);
    const response = await fetch(`${server.url}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ ...ok, stream: true }),
    });
    expect(response.status).toBe(429);
    expect(((await response.json()) as { type: string }).type).toBe("RateLimitError");
    abort.abort();
    expect((await Promise.all(held)).every((r) => r.finish === "abort")).toBe(true);
  });
});
