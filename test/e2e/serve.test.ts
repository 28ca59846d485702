// `rlx serve` end to end: the real CLI process on a micro model, driven with the official `openai`
// npm client (and plain fetch for vLLM's extensions). Numerics are checked against the trainer:
// the sampling logprobs the server returns go through the native train step as inference
// logprobs, and its mismatch_kl must be below 1e-6; prompt_logprobs must equal the native scoring
// call. Also: chat, n > 1, stop strings and stop token ids, seeds, streaming, 64 concurrent
// requests against 64 sequential ones (ratio printed, only correctness asserted), SIGTERM drain.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { ChatRenderer } from "../../src/model/render.ts";
import { loadModel } from "../../src/model/hf.ts";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import { score } from "../../src/native/generate.ts";
import type { NativeModel } from "../../src/native/model.ts";
import { trainStep } from "../../src/native/train.ts";
import { splitAssistant } from "../../src/serve/chat_stream.ts";
import type { ToolSpec } from "../../src/data/chat.ts";
import { microModelDir } from "../fixtures/serve_model.ts";
import { type ServeProcess, startServe } from "./serve_harness.ts";

let dir: string;
let serve: ServeProcess;
let client: OpenAI;
let model: NativeModel;
let tokenizer: Tokenizer;
const MODEL = "micro";

beforeAll(async () => {
  dir = await microModelDir({ seed: 3 });
  serve = await startServe([
    "--model",
    dir,
    "--served-model-name",
    MODEL,
    "--max-batch",
    "64",
    "--max-model-len",
    "512",
  ]);
  client = new OpenAI({ baseURL: `${serve.url}/v1`, apiKey: "unused", maxRetries: 0 });
  model = await loadModel(dir);
  tokenizer = Tokenizer.load(dir);
});

afterAll(async () => {
  model?.free();
  if (serve) expect(await serve.stop()).toBe(0);
});

/** POST JSON, expect 200, return the body (for vLLM fields the openai types do not know). */
async function post(path: string, body: Record<string, unknown>): Promise<any> {
  const response = await fetch(`${serve.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, ...body }),
  });
  const json = await response.json();
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${JSON.stringify(json)}`);
  return json;
}

const ids = (tokens: string[]) => tokens.map((t) => Number(t.replace("token_id:", "")));
const PROMPTS = [[72, 101, 108, 108, 111], [1, 2, 3], Array.from({ length: 40 }, (_, i) => (i * 37) % 256)];

describe("completions", () => {
  test("text prompt with logprobs: one logprob per token, usage counts the tokens", async () => {
    const out = await client.completions.create({
      model: MODEL,
      prompt: "Hello there",
      max_tokens: 12,
      logprobs: 0,
      seed: 1,
    });
    const choice = out.choices[0]!;
    expect(out.object).toBe("text_completion");
    expect(choice.finish_reason).toBe("length");
    expect(choice.logprobs!.token_logprobs!.length).toBe(12);
    expect(choice.logprobs!.token_logprobs!.every((lp) => lp <= 0 && Number.isFinite(lp))).toBe(true);
    expect(out.usage).toEqual({
      prompt_tokens: tokenizer.encode("Hello there").length,
      completion_tokens: 12,
      total_tokens: tokenizer.encode("Hello there").length + 12,
    });
    expect((out as any).policy_version).toBe(0);
  });

  test("sampling logprobs equal the trainer's logprobs for the same tokens (mismatch_kl < 1e-6)", async () => {
    for (const [temperature, top_p, top_k] of [
      [1, 1, -1],
      [0.7, 0.9, 20],
      [0, 1, -1],
    ] as const) {
      const out = await post("/v1/completions", {
        prompt: PROMPTS,
        max_tokens: 24,
        temperature,
        top_p,
        top_k,
        seed: 11,
        logprobs: 0,
        return_tokens_as_token_ids: true,
      });
      for (const choice of out.choices) {
        const prompt = PROMPTS[choice.index]!;
        const completion = ids(choice.logprobs.tokens);
        const lps: number[] = choice.logprobs.token_logprobs;
        const T = prompt.length + completion.length;
        const t = temperature || 1; // greedy reports temperature-1 logprobs
        const row = {
          tokenIds: Int32Array.from([...prompt, ...completion]),
          sampleLengths: Int32Array.of(T),
          lossMask: Uint8Array.from({ length: T }, (_, i) => (i >= prompt.length ? 1 : 0)),
          advantages: new Float32Array(T),
          inferenceLogprobs: Float32Array.from({ length: T }, (_, i) =>
            i >= prompt.length ? lps[i - prompt.length]! : 0,
          ),
          temperatures: new Float32Array(T).fill(t),
        };
        const { all } = trainStep(model, row, { nRl: completion.length, nCe: 1, nRefKl: 1 });
        expect(all.mismatchKlCount).toBe(completion.length);
        expect(all.mismatchKlSum / all.mismatchKlCount).toBeLessThan(1e-6);
        const scored = score(model, [[...prompt, ...completion]], { temperature: t }).logprobs[0]!;
        const maxDiff = Math.max(...lps.map((lp, j) => Math.abs(lp - scored[prompt.length + j]!)));
        expect(maxDiff).toBeLessThan(1e-4);
      }
    }
  });

  test("prompt_logprobs equal the native scoring call (first token null)", async () => {
    const out = await post("/v1/completions", { prompt: PROMPTS, max_tokens: 1, prompt_logprobs: 0 });
    const scored = score(model, PROMPTS).logprobs;
    for (const choice of out.choices) {
      const prompt = PROMPTS[choice.index]!;
      expect(choice.prompt_logprobs.length).toBe(prompt.length);
      expect(choice.prompt_logprobs[0]).toBeNull();
      prompt.slice(1).forEach((token, j) => {
        const entry = choice.prompt_logprobs[j + 1][String(token)];
        expect(entry.logprob).toBe(scored[choice.index]![j + 1]!);
      });
    }
  });

  test("seeds reproduce outputs; another seed gives another output", async () => {
    const run = (seed: number) =>
      client.completions.create({ model: MODEL, prompt: "seeded", max_tokens: 16, temperature: 1, seed });
    const [a, b, c] = await Promise.all([run(5), run(5), run(6)]);
    expect(b.choices[0]!.text).toBe(a.choices[0]!.text);
    expect(c.choices[0]!.text).not.toBe(a.choices[0]!.text);
  });

  test("n > 1: n choices with their own indices and samples, usage sums them", async () => {
    const out = await client.completions.create({
      model: MODEL,
      prompt: ["one", "two"],
      n: 3,
      max_tokens: 10,
      seed: 2,
    });
    expect(out.choices.map((c) => c.index).sort()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(new Set(out.choices.slice(0, 3).map((c) => c.text)).size).toBeGreaterThan(1);
    expect(out.usage!.completion_tokens).toBe(60);
    expect(out.usage!.prompt_tokens).toBe(6);
  });

  test("stop strings cut the text before the stop; stop token ids end the tokens at the stop token", async () => {
    const base = await post("/v1/completions", {
      prompt: [65, 66],
      max_tokens: 32,
      seed: 9,
      logprobs: 0,
      return_tokens_as_token_ids: true,
    });
    const text: string = base.choices[0].text;
    const tokens = ids(base.choices[0].logprobs.tokens);
    const at = [...text].findIndex((ch, i) => i >= 1 && ch !== "\uFFFD");
    expect(at).toBeGreaterThan(0);
    const stop = [...text][at]!;
    const cut = await client.completions.create({
      model: MODEL,
      prompt: [65, 66],
      max_tokens: 32,
      seed: 9,
      stop: [stop, "never-appears"],
    });
    expect(cut.choices[0]!.text).toBe(text.slice(0, text.indexOf(stop)));
    expect(cut.choices[0]!.finish_reason).toBe("stop");
    expect((cut.choices[0] as any).stop_reason).toBe(stop);

    const stopId = tokens[4]!;
    const first = tokens.indexOf(stopId);
    const byId = await post("/v1/completions", {
      prompt: [65, 66],
      max_tokens: 32,
      seed: 9,
      logprobs: 0,
      return_tokens_as_token_ids: true,
      stop_token_ids: [stopId],
      ignore_eos: true,
    });
    expect(ids(byId.choices[0].logprobs.tokens)).toEqual(tokens.slice(0, first + 1));
    expect(byId.choices[0].finish_reason).toBe("stop");
    expect(byId.choices[0].stop_reason).toBe(stopId);
  });

  test("streaming: the deltas add up to the non-streamed text, the last chunk has the finish reason", async () => {
    const request = { model: MODEL, prompt: "stream me", max_tokens: 20, seed: 4 };
    const whole = await client.completions.create(request);
    const stream = await client.completions.create({
      ...request,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let finish: string | null = null;
    let usage;
    for await (const chunk of stream) {
      for (const c of chunk.choices) ((text += c.text), (finish = c.finish_reason ?? finish));
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(whole.choices[0]!.text);
    expect(finish).toBe(whole.choices[0]!.finish_reason);
    expect(usage).toEqual(whole.usage);
  });
});

describe("chat completions", () => {
  const messages = [
    { role: "system" as const, content: "You are terse." },
    { role: "user" as const, content: "Say something." },
  ];

  test("rendered with the chat template; streamed deltas equal the whole message", async () => {
    const whole = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 16,
      seed: 8,
      logprobs: true,
    });
    const choice = whole.choices[0]!;
    expect(whole.object).toBe("chat.completion");
    expect(choice.message.role).toBe("assistant");
    const rendered = new ChatRenderer(tokenizer).render(messages, { addGenerationPrompt: true }).tokenIds;
    expect(whole.usage!.prompt_tokens).toBe(rendered.length);
    expect(choice.logprobs!.content!.length).toBe(whole.usage!.completion_tokens);
    if (choice.finish_reason === "stop") expect(choice.message.content).not.toContain("<|im_end|>");

    const stream = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 16,
      seed: 8,
      stream: true,
    });
    let content = "";
    let role;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta;
      role ??= delta?.role;
      content += delta?.content ?? "";
    }
    expect(role).toBe("assistant");
    expect(content).toBe(choice.message.content!);
  });

  test("tools: rendered by the template as /tokenize renders messages; the completion split as the parser splits it", async () => {
    const tools: ToolSpec[] = [
      {
        type: "function",
        function: { name: "forth", description: "run", parameters: { type: "object", properties: {} } },
      },
    ];
    const renderer = new ChatRenderer(tokenizer);
    const tokenized = await post("/tokenize", { messages, tools });
    expect(tokenized.tokens).toEqual(renderer.render(messages, { tools, addGenerationPrompt: true }).tokenIds);
    expect(tokenizer.decode(tokenized.tokens)).toContain('"name": "forth"');
    // tool_choice "none" leaves the tools out of the prompt, as vLLM does.
    const none = await post("/tokenize", { messages, tools, tool_choice: "none" });
    expect(none.tokens).toEqual(renderer.render(messages, { addGenerationPrompt: true }).tokenIds);
    const chat = await post("/v1/chat/completions", { messages, tools, max_tokens: 24, seed: 8 });
    expect(chat.usage.prompt_tokens).toBe(tokenized.count);
    // The same sample through /v1/completions, split by the parser: the chat message is that split.
    const raw = await post("/v1/completions", { prompt: tokenized.tokens, max_tokens: 24, seed: 8 });
    const split = splitAssistant(raw.choices[0].text, true);
    expect(chat.choices[0].message).toEqual({
      role: "assistant",
      content: split.tool_calls.length > 0 && split.content.trim() === "" ? null : split.content,
      ...(split.reasoning_content ? { reasoning_content: split.reasoning_content } : {}),
      tool_calls: split.tool_calls,
    });
  });

  test("n > 1 chat choices", async () => {
    const out = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 8, n: 3, seed: 1 });
    expect(out.choices.map((c) => c.index)).toEqual([0, 1, 2]);
  });
});

test("64 concurrent requests complete correctly, and faster than 64 sequential ones", async () => {
  const request = (i: number) =>
    post("/v1/completions", {
      prompt: [10 + i, 20, 30],
      max_tokens: 8,
      seed: 100 + i,
      logprobs: 0,
      return_tokens_as_token_ids: true,
      ignore_eos: true,
    });
  let t0 = performance.now();
  const sequential: any[] = [];
  for (let i = 0; i < 64; i++) sequential.push(await request(i));
  const sequentialMs = performance.now() - t0;
  t0 = performance.now();
  const concurrent = await Promise.all(Array.from({ length: 64 }, (_, i) => request(i)));
  const concurrentMs = performance.now() - t0;
  console.log(
    `64 requests x 8 tokens: sequential ${sequentialMs.toFixed(0)} ms, concurrent ${concurrentMs.toFixed(0)} ms, ratio ${(sequentialMs / concurrentMs).toFixed(1)}x`,
  );
  concurrent.forEach((out, i) => {
    expect(out.choices[0].logprobs.tokens.length).toBe(8);
    expect(out.choices[0].logprobs.tokens).toEqual(sequential[i].choices[0].logprobs.tokens);
  });
}, 120_000);

test("SIGTERM drains: streams in flight finish, then the process exits 0", async () => {
  const other = await startServe(["--model", dir, "--max-batch", "4", "--max-model-len", "256"]);
  const streams = await Promise.all(
    Array.from({ length: 3 }, async (_, i) => {
      const response = await fetch(`${other.url}/v1/completions`, {
        method: "POST",
        body: JSON.stringify({ prompt: [i + 1], max_tokens: 120, stream: true, ignore_eos: true }),
      });
      const reader = response.body!.getReader();
      const first = await reader.read();
      return { reader, text: new TextDecoder().decode(first.value) };
    }),
  );
  const exited = other.stop();
  const bodies = await Promise.all(
    streams.map(async ({ reader, text }) => {
      for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
      return text;
    }),
  );
  for (const body of bodies) {
    expect(body).toContain('"finish_reason":"length"');
    expect(body.trimEnd().endsWith("data: [DONE]")).toBe(true);
  }
  expect(await exited).toBe(0);
  expect(other.output()).toContain("rlx serve: stopped");
}, 30_000);
