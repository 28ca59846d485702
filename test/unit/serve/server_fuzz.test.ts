// rlx serve's request bodies as properties (fast-check, bounded runs), in-process on a micro
// model: random JSON, random values in every field the routes read, and raw non-JSON bytes, sent
// to every POST route; no answer is a 5xx, every error has vLLM's body, streams end, and the
// server still serves a plain completion afterwards.
import { afterAll, beforeAll, expect, test } from "bun:test";
import fc from "fast-check";
import { Engine } from "../../../src/engine/engine.ts";
import { type RunningServer, startServer } from "../../../src/serve/server.ts";
import { loadModel } from "../../../src/model/hf.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";
import { microModelDir } from "../../fixtures/serve_model.ts";

let server: RunningServer;
const internalErrors: unknown[] = [];

beforeAll(async () => {
  const dir = await microModelDir();
  const engine = new Engine(await loadModel(dir), { maxBatch: 4, maxModelLen: 48, maxQueue: 64 });
  server = startServer({
    engine,
    tokenizer: Tokenizer.load(dir),
    modelName: "micro",
    port: 0,
    onInternalError: (err) => internalErrors.push(err),
  });
});

afterAll(async () => {
  await server?.drain();
});

const ROUTES = ["/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize", "/update_weights"];

/** A value of any JSON type, small, with the odd number a validator might miss. */
const value = fc.oneof(
  fc.constantFrom(0, -1, 1, 2, 1e309, -0, 0.5, 2 ** 53, "", "x", null, true, false, [], {}, [1, 2], [[3]]),
  fc.integer({ min: -5, max: 70 }),
  fc.double(),
  fc.string({ maxLength: 12 }),
  fc.array(fc.integer({ min: -2, max: 300 }), { maxLength: 6 }),
  fc.jsonValue({ maxDepth: 2 }),
);
const FIELDS = [
  "model",
  "prompt",
  "messages",
  "max_tokens",
  "max_completion_tokens",
  "temperature",
  "top_p",
  "top_k",
  "n",
  "best_of",
  "stop",
  "stop_token_ids",
  "seed",
  "logprobs",
  "top_logprobs",
  "prompt_logprobs",
  "echo",
  "stream",
  "stream_options",
  "ignore_eos",
  "include_stop_str_in_output",
  "skip_special_tokens",
  "return_tokens_as_token_ids",
  "return_token_ids",
  "chat_template_kwargs",
  "add_generation_prompt",
  "tokens",
  "path",
  "version",
];
const messages = fc.array(
  fc.record(
    { role: fc.constantFrom("user", "assistant", "system", "tool", "bogus"), content: value },
    { requiredKeys: [] },
  ),
  { maxLength: 3 },
);
/** A valid request with random settings, so that generation (and streaming) is exercised too. */
const valid = fc
  .record(
    {
      prompt: fc.oneof(
        fc.string({ minLength: 1, maxLength: 20 }),
        fc.array(fc.integer({ min: 0, max: 258 }), { minLength: 1, maxLength: 8 }),
      ),
      max_tokens: fc.integer({ min: 1, max: 8 }),
      temperature: fc.double({ min: 0, max: 2, noNaN: true }),
      top_p: fc.double({ min: 0.01, max: 1, noNaN: true }),
      top_k: fc.integer({ min: -1, max: 50 }),
      n: fc.integer({ min: 1, max: 3 }),
      seed: fc.nat(),
      stop: fc.array(fc.string({ minLength: 1, maxLength: 3 }), { maxLength: 2 }),
      stream: fc.boolean(),
      logprobs: fc.integer({ min: 0, max: 5 }),
    },
    { requiredKeys: ["prompt", "max_tokens"] },
  )
  .map((request) => JSON.stringify(request));
const body = fc.oneof(
  { arbitrary: valid, weight: 2 },
  // a plausible request with random values in the fields the routes read
  fc
    .record({
      fields: fc.dictionary(fc.constantFrom(...FIELDS), value, { maxKeys: 6 }),
      prompt: fc.oneof(
        fc.string({ maxLength: 20 }),
        fc.array(fc.integer({ min: 0, max: 258 }), { minLength: 1, maxLength: 8 }),
      ),
      messages,
      maxTokens: fc.integer({ min: 1, max: 6 }),
    })
    .map(({ fields, prompt, messages, maxTokens }) =>
      JSON.stringify({ prompt, messages, max_tokens: maxTokens, ...fields }),
    ),
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 40 }),
);

test("random request bodies on every route: never a 5xx, always vLLM's error body on 4xx", async () => {
  const served: number[] = [];
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...ROUTES), body, async (route, text) => {
      const response = await fetch(`${server.url}${route}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: text,
      });
      const answer = await response.text(); // a stream is read to its end
      expect(response.status).toBeLessThan(500);
      if (response.status === 200) served.push(1);
      if (response.status >= 400) {
        expect(JSON.parse(answer)).toMatchObject({ object: "error", code: response.status });
      }
    }),
    { numRuns: 250, seed: 25 },
  );
  expect(internalErrors).toEqual([]);
  expect(served.length).toBeGreaterThan(25); // enough bodies were valid to reach generation
  const ok = await fetch(`${server.url}/v1/completions`, {
    method: "POST",
    body: JSON.stringify({ prompt: [3, 4], max_tokens: 3 }),
  });
  expect(ok.status).toBe(200);
  expect(((await ok.json()) as { choices: unknown[] }).choices).toHaveLength(1);
}, 120_000);
