// The OpenAI-compatible client against real HTTP test servers that answer like vLLM, fail,
// stall and recover: retries on 5xx / 429 / connection errors / timeouts, none on 400, errors that
// name the endpoint and status, round-robin, sticky sessions, the concurrency limit.
import { afterAll, expect, test } from "bun:test";
import { EndpointError } from "../../../src/errors.ts";
import { OpenAIClient } from "../../../src/clients/client.ts";

type Handler = (body: any, path: string) => Response | Promise<Response>;
const servers: ReturnType<typeof Bun.serve>[] = [];

function serve(handler: Handler): string {
  const server = Bun.serve({
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const body = req.method === "POST" ? await req.json() : undefined;
      return handler(body, url.pathname);
    },
  });
  servers.push(server);
  return `http://127.0.0.1:${server.port}/v1`;
}
afterAll(() => servers.forEach((s) => s.stop(true)));

/** A vLLM-style completion: echoes the prompt's last token + 1, twice, with logprobs. */
function completion(body: any, version = 3): Response {
  const last = body.prompt[body.prompt.length - 1] as number;
  const ids = [last + 1, last + 2];
  return Response.json({
    choices: [
      { finish_reason: "length", logprobs: { tokens: ids.map((i) => `token_id:${i}`), token_logprobs: [-0.5, -0.25] } },
    ],
    policy_version: version,
  });
}

const request = { promptIds: [1, 2, 3], maxTokens: 2, temperature: 1, topP: 1, topK: 0, stop: [] };
// the per-attempt timeout only ends attempts in the stall test, which sets its own
const fast = { timeoutMs: 30_000, retries: 3, backoffMs: 5 };

test("parses a vLLM-style completion with token ids and logprobs", async () => {
  let seen: any;
  const url = serve((body) => ((seen = body), completion(body)));
  const client = new OpenAIClient({ model: "m", baseUrls: [url], ...fast });
  const out = await client.complete(request);
  expect(out).toEqual({ tokenIds: [4, 5], logprobs: [-0.5, -0.25], finishReason: "length", policyVersion: 3 });
  expect(seen).toMatchObject({
    model: "m",
    prompt: [1, 2, 3],
    max_tokens: 2,
    return_tokens_as_token_ids: true,
    top_k: -1,
  });
});

test("retries 5xx and 429 and recovers", async () => {
  let calls = 0;
  const url = serve((body) =>
    ++calls <= 2 ? new Response("overloaded", { status: calls === 1 ? 503 : 429 }) : completion(body),
  );
  const client = new OpenAIClient({ model: "m", baseUrls: [url], ...fast });
  expect((await client.complete(request)).tokenIds).toEqual([4, 5]);
  expect(calls).toBe(3);
});

test("a stalled server times out per attempt, then the retry succeeds", async () => {
  let calls = 0;
  const url = serve(async (body) => {
    if (++calls === 1) await new Promise(() => {}); // never answers: only the timeout ends it
    return completion(body);
  });
  const client = new OpenAIClient({ model: "m", baseUrls: [url], ...fast, timeoutMs: 1000 });
  expect((await client.complete(request)).tokenIds).toEqual([4, 5]);
  expect(calls).toBe(2);
});

test("400 is not retried and the error names endpoint, status and body", async () => {
  let calls = 0;
  const url = serve(
    () => (calls++, Response.json({ error: { message: "max_tokens must be positive" } }, { status: 400 })),
  );
  const client = new OpenAIClient({ model: "m", baseUrls: [url], ...fast });
  const err = await client.complete(request).catch((e) => e);
  expect(err).toBeInstanceOf(EndpointError);
  expect(err.message).toContain(`${url}/completions`);
  expect(err.message).toContain("status 400");
  expect(err.message).toContain("max_tokens must be positive");
  expect(calls).toBe(1);
});

test("a server that never answers: the error says how many attempts and why", async () => {
  const client = new OpenAIClient({ model: "m", baseUrls: ["http://127.0.0.1:1/v1"], ...fast, retries: 1 });
  const err = await client.complete(request).catch((e) => e);
  expect(err).toBeInstanceOf(EndpointError);
  expect(err.message).toContain("gave up after 2 attempts");
  expect(err.message).toContain("connection failed");
});

test("round-robin over base URLs, sticky per session", async () => {
  const hits = [0, 0];
  const urls = [0, 1].map((i) => serve((body) => (hits[i]!++, completion(body))));
  const client = new OpenAIClient({ model: "m", baseUrls: urls, ...fast });
  for (let i = 0; i < 4; i++) await client.complete(request);
  expect(hits).toEqual([2, 2]);
  for (let i = 0; i < 3; i++) await client.complete({ ...request, session: "rollout-7" });
  expect(hits[0]! === 5 || hits[1]! === 5).toBe(true);
});

test("prompt logprobs from vLLM's prompt_logprobs, first token 0", async () => {
  const url = serve((body) =>
    Response.json({
      choices: [
        {
          finish_reason: "length",
          prompt_logprobs: body.prompt.map((t: number, i: number) =>
            i === 0 ? null : { [String(t)]: { logprob: -t / 10 } },
          ),
        },
      ],
    }),
  );
  const client = new OpenAIClient({ model: "m", baseUrls: [url], ...fast });
  expect(
    await client.score([
      [5, 6, 7],
      [1, 2],
    ]),
  ).toEqual([
    [0, -0.6, -0.7],
    [0, -0.2],
  ]);
});

test("the concurrency limit holds requests beyond it", async () => {
  let inFlight = 0;
  let peak = 0;
  const url = serve(async (body) => {
    peak = Math.max(peak, ++inFlight);
    await Bun.sleep(20);
    inFlight--;
    return completion(body);
  });
  const client = new OpenAIClient({ model: "m", baseUrls: [url], ...fast, concurrency: 3 });
  await Promise.all(Array.from({ length: 12 }, () => client.complete(request)));
  expect(peak).toBe(3);
});
