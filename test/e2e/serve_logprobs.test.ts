// `rlx serve`'s top-N logprobs end to end, as vLLM answers them: `logprobs: N` on completions,
// `logprobs: true, top_logprobs: N` on chat, `prompt_logprobs: N`, `echo`, and the max_logprobs
// limit. The numbers must equal the native calls exactly: prompt alternatives equal
// rlx_score_top's, and a seeded completion's alternatives equal a NativeGenerator's run with the
// same seed (rlx_gen_top_logprobs). The lm-evaluation-harness loglikelihood payload (`echo`,
// `logprobs: 1`, `max_tokens: 1`) goes through the official `openai` client and is parsed as
// lm-eval parses it.
import { afterAll, beforeAll, expect, test } from "bun:test";
import OpenAI from "openai";
import { loadModel } from "../../src/model/hf.ts";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import { NativeGenerator, score } from "../../src/native/generate.ts";
import type { NativeModel } from "../../src/native/model.ts";
import { scoreTop } from "../../src/native/score_top.ts";
import { microModelDir } from "../fixtures/serve_model.ts";
import { type ServeProcess, startServe } from "./serve_harness.ts";

let serve: ServeProcess;
let client: OpenAI;
let model: NativeModel;
let tokenizer: Tokenizer;
const MODEL = "micro";
const PROMPTS = [[72, 101, 108, 108, 111], Array.from({ length: 30 }, (_, i) => (i * 37) % 256)];

beforeAll(async () => {
  const dir = await microModelDir({ seed: 4, sharpen: 3 });
  serve = await startServe([
    "--model",
    dir,
    "--served-model-name",
    MODEL,
    "--max-model-len",
    "256",
    "--max-logprobs",
    "8",
    // Every prefill a full one: a prompt continuing K/V an earlier request left in a slot matches
    // a fresh generator only to rounding, and these numbers are compared exactly.
    "--no-prefix-caching",
  ]);
  client = new OpenAI({ baseURL: `${serve.url}/v1`, apiKey: "unused", maxRetries: 0 });
  model = await loadModel(dir);
  tokenizer = Tokenizer.load(dir);
});

afterAll(async () => {
  model?.free();
  if (serve) expect(await serve.stop()).toBe(0);
});

async function post(path: string, body: Record<string, unknown>): Promise<{ status: number; json: any }> {
  const response = await fetch(`${serve.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, ...body }),
  });
  return { status: response.status, json: await response.json() };
}

const idOf = (token: string) => Number(token.replace("token_id:", ""));

test("prompt_logprobs = N: the prompt token's logprob and rank and the N alternatives equal rlx_score_top's", async () => {
  const { status, json } = await post("/v1/completions", { prompt: PROMPTS, max_tokens: 1, prompt_logprobs: 5 });
  expect(status).toBe(200);
  const native = scoreTop(model, PROMPTS, { k: 5 });
  for (const choice of json.choices) {
    const prompt = PROMPTS[choice.index]!;
    const want = native[choice.index]!;
    expect(choice.prompt_logprobs[0]).toBeNull();
    prompt.slice(1).forEach((token, j) => {
      const row = choice.prompt_logprobs[j + 1];
      const top = want.top[j + 1]!;
      expect(row[String(token)]).toEqual({
        logprob: want.logprobs[j + 1]!,
        rank: top.rank,
        decoded_token: tokenizer.decode([token]),
      });
      top.ids.forEach((id, r) => {
        if (id !== token)
          expect(row[String(id)]).toEqual({
            logprob: top.logprobs[r]!,
            rank: r + 1,
            decoded_token: tokenizer.decode([id]),
          });
      });
      expect(Object.keys(row).length).toBe(top.ids.includes(token) ? 5 : 6);
    });
  }
});

test("logprobs = N on a seeded completion equals the native generator's top-N with that seed, exactly", async () => {
  const prompt = PROMPTS[1]!;
  const request = { prompt, max_tokens: 8, temperature: 0.7, seed: 17, ignore_eos: true };
  const out = await client.completions.create({
    model: MODEL,
    ...request,
    logprobs: 4,
    // vLLM's extension: tokens spelled as ids, so alternatives are never merged by equal text.
    ...({ return_tokens_as_token_ids: true } as object),
  });
  const lp = out.choices[0]!.logprobs!;
  using gen = NativeGenerator.create(model, { slots: 1, capacity: 256 });
  const tokens: number[] = [];
  let produced = gen.add([{ prompt, sampling: { temperature: 0.7, maxNewTokens: 8, seed: 17 } }]);
  for (let step = 0; produced.length > 0; step++) {
    const [t] = produced;
    const [top] = gen.topLogprobs(1, 4);
    tokens.push(t!.token);
    expect(idOf(lp.tokens![step]!)).toBe(t!.token);
    expect(lp.token_logprobs![step]).toBe(t!.logprob);
    const want: Record<string, number> = {};
    top!.ids.forEach((id, r) => (want[`token_id:${id}`] = top!.logprobs[r]!));
    want[`token_id:${t!.token}`] = t!.logprob;
    expect(lp.top_logprobs![step]).toEqual(want);
    if (t!.finish) break;
    produced = gen.step();
  }
  expect(tokens.length).toBe(8);
});

test("chat: logprobs true, top_logprobs N gives N alternatives per token, most likely first", async () => {
  const out = await client.chat.completions.create({
    model: MODEL,
    messages: [{ role: "user", content: "Hi" }],
    max_tokens: 6,
    temperature: 1,
    seed: 3,
    logprobs: true,
    top_logprobs: 3,
  });
  const content = out.choices[0]!.logprobs!.content!;
  expect(content.length).toBeGreaterThan(0);
  for (const entry of content) {
    expect(entry.top_logprobs.length).toBe(3);
    const values = entry.top_logprobs.map((t) => t.logprob);
    expect(values).toEqual([...values].sort((a, b) => b - a));
    expect(entry.logprob).toBeLessThanOrEqual(values[0]!);
    for (const t of entry.top_logprobs) expect(t.bytes).toEqual(Array.from(new TextEncoder().encode(t.token)));
  }
});

test("the lm-eval loglikelihood payload (echo, logprobs 1, max_tokens 1) through the openai client", async () => {
  const context = "The capital of France is";
  const continuation = " Paris";
  const ctxlen = tokenizer.encode(context).length;
  const all = tokenizer.encode(context + continuation);
  const out = await client.completions.create({
    model: MODEL,
    prompt: context + continuation,
    temperature: 0,
    max_tokens: 1,
    logprobs: 1,
    seed: 1234,
    echo: true,
  });
  const choice = out.choices[0]!;
  expect(choice.text.startsWith(context + continuation)).toBe(true);
  const lp = choice.logprobs!;
  expect(lp.token_logprobs!.length).toBe(all.length + 1);
  expect(lp.token_logprobs![0]).toBeNull();
  expect(lp.top_logprobs![0]).toBeNull();
  expect(lp.text_offset!.slice(0, 3)).toEqual([0, 1, 2]); // the byte tokenizer: one character per token
  const scored = score(model, [all]).logprobs[0]!;
  all.slice(1).forEach((_, j) => expect(lp.token_logprobs![j + 1]).toBe(scored[j + 1]!));
  // lm-eval's parse_logprobs: the continuation's logprob, and whether greedy decoding gives it.
  const tokenLogprobs = lp.token_logprobs!.slice(ctxlen, -1) as number[];
  const tops = lp.top_logprobs!.slice(ctxlen, -1) as Record<string, number>[];
  const loglikelihood = tokenLogprobs.reduce((a, b) => a + b, 0);
  const isGreedy = tokenLogprobs.every((t, i) => t === Math.max(...Object.values(tops[i]!)));
  const native = scoreTop(model, [all], { k: 1 })[0]!;
  const wantGreedy = all.slice(ctxlen).every((_, i) => native.top[ctxlen + i]!.rank === 1);
  expect(loglikelihood).toBeCloseTo(
    Array.from(scored.subarray(ctxlen)).reduce((a, b) => a + b, 0),
    4,
  );
  expect(isGreedy).toBe(wantGreedy);
});

test("past max_logprobs (8 here) each field is a 400 naming it; echo with stream is refused", async () => {
  for (const [path, body, param] of [
    ["/v1/completions", { prompt: "x", logprobs: 9 }, "logprobs"],
    ["/v1/completions", { prompt: "x", prompt_logprobs: 9 }, "prompt_logprobs"],
    [
      "/v1/chat/completions",
      { messages: [{ role: "user", content: "x" }], logprobs: true, top_logprobs: 9 },
      "top_logprobs",
    ],
    ["/v1/completions", { prompt: "x", echo: true, stream: true }, "echo"],
  ] as const) {
    const { status, json } = await post(path, body);
    expect(status).toBe(400);
    expect(json.param).toBe(param);
    if (param !== "echo") expect(json.message).toContain("max_logprobs (8)");
  }
  const ok = await post("/v1/completions", { prompt: "x", max_tokens: 1, logprobs: 8 });
  expect(ok.status).toBe(200);
});
