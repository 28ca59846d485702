// End to end: the rollout driver against a tiny real model (rlx init layout, loaded through the
// shim, sampled by the native generator). A random model never emits a tool call, so the model
// is first fine-tuned with the shim's own train step on one gold demonstration of a forth task
// (cross-entropy on the assistant tokens) until it reproduces it; greedy sampling then runs the
// full multi-turn protocol: tool call -> real interpreter output -> final answer.
//
// Checks: the record is well formed (roles, sampled flags, logprobs one per sampled token, content
// marks, one token sequence that is exactly what the model was prompted with), the sampling
// logprobs equal the model's prefill logprobs of the finished sequence (what the trainer will
// recompute), the reward, and that a tool which throws gives an error rollout instead of a crash.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import forth from "../../src/envs/forth/index.ts";
import { createEnv } from "../../src/envs/index.ts";
import type { Env, Task } from "../../src/envs/types.ts";
import type { CompletionRequest, SamplingClient } from "../../src/clients/types.ts";
import type { ChatMessage } from "../../src/data/chat.ts";
import { loadModel } from "../../src/model/hf.ts";
import { initModel } from "../../src/model/presets.ts";
import { ChatRenderer } from "../../src/model/render.ts";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import type { NativeModel } from "../../src/native/model.ts";
import { NativeOptimizer, trainStep } from "../../src/native/train.ts";
import { runRollout } from "../../src/rollout/driver.ts";
import type { Rollout } from "../../src/data/types.ts";
import { LocalSamplingClient } from "./rollout_client.ts";

// A compact ChatML (tool calls as `<tool_call>{"name": ..., "arguments": ...}</tool_call>`, no
// tools preamble): the model's own template, kept short so fine-tuning on CPU takes seconds.
const COMPACT_CHATML = [
  "{%- for message in messages %}",
  "{%- if message.role == 'assistant' %}",
  "{{- '<|im_start|>assistant\n' }}{%- if message.content %}{{- message.content }}{%- endif %}",
  "{%- if message.tool_calls %}{%- for call in message.tool_calls %}{{- '<tool_call>' + (call.function | tojson) + '</tool_call>' }}{%- endfor %}{%- endif %}",
  "{{- '<|im_end|>\n' }}",
  "{%- else %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}{%- endif %}",
  "{%- endfor %}",
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}",
].join("\n");

// A micro Qwen3-layout model over the byte vocabulary: big enough to memorize one conversation.
const CONFIG = {
  model_type: "qwen3",
  vocab_size: 320,
  hidden_size: 64,
  intermediate_size: 256,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 16,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  max_position_embeddings: 4096,
  tie_word_embeddings: true,
};

let dir: string;
let model: NativeModel;
let renderer: ChatRenderer;
let env: Env;
let task: Task;
let demo: ChatMessage[];

/** Records every request so the test can compare prompts with the rollout's tokens. */
class Recording implements SamplingClient {
  readonly requests: CompletionRequest[] = [];
  constructor(private readonly inner: SamplingClient) {}
  complete(request: CompletionRequest) {
    this.requests.push(request);
    return this.inner.complete(request);
  }
  score(sequences: number[][]) {
    return this.inner.score(sequences);
  }
}

/** Cross-entropy on the demonstration's assistant tokens (not their "<|im_start|>assistant\n"). */
function fineTune(messages: ChatMessage[]): number {
  const rendered = renderer.render(messages, { tools: env.tools.map((t) => t.spec), addGenerationPrompt: false });
  const T = rendered.tokenIds.length;
  const header = renderer.tokenizer.encode("<|im_start|>assistant\n").length;
  const ceWeights = new Float32Array(T);
  const seen = new Map<number, number>();
  rendered.messageIndex.forEach((m, t) => {
    const k = seen.get(m) ?? 0;
    seen.set(m, k + 1);
    if (messages[m]?.role === "assistant" && k >= header) ceWeights[t] = 1;
  });
  const nCe = ceWeights.reduce((a, b) => a + b, 0);
  const row = {
    tokenIds: Int32Array.from(rendered.tokenIds),
    sampleLengths: Int32Array.from([T]),
    lossMask: new Uint8Array(T),
    advantages: new Float32Array(T),
    inferenceLogprobs: new Float32Array(T),
    temperatures: new Float32Array(T).fill(1),
    ceWeights,
  };
  using optimizer = NativeOptimizer.create(model, { weightDecay: 0 });
  let loss = Number.POSITIVE_INFINITY;
  let steps = 0;
  for (; steps < 200 && loss > 0.02; steps++) {
    loss = trainStep(model, row, { nRl: 1, nCe, nRefKl: 1 }).all.ceSum / nCe;
    optimizer.step(1e-2, 1.0);
  }
  console.log(`fine-tuned on ${T} tokens for ${steps} steps: ce ${loss.toFixed(4)}`);
  return loss;
}

/** Invariants every rollout record must satisfy, whatever the model said. */
function expectWellFormed(rollout: Rollout, requests: CompletionRequest[]): void {
  expect(rollout.numSamples).toBe(1);
  expect(rollout.segments.filter((s) => s.sampled).length).toBe(rollout.numTurns);
  expect(requests.length).toBe(rollout.numTurns);
  for (const segment of rollout.segments) {
    expect(segment.isContent!.length).toBe(segment.tokenIds.length);
    expect(segment.role).toBe(rollout.messages[segment.messageIndex]?.role ?? "assistant");
    if (segment.sampled) {
      expect(segment.role).toBe("assistant");
      expect(segment.logprobs!.length).toBe(segment.tokenIds.length);
      for (const lp of segment.logprobs!) expect(Number.isFinite(lp) && lp <= 1e-6).toBe(true);
    } else {
      expect(segment.logprobs).toBeUndefined();
    }
  }
  // One sequence: each turn was prompted with everything before its sampled segment.
  let prefix: number[] = [];
  let turn = 0;
  for (const segment of rollout.segments) {
    if (segment.sampled) expect(requests[turn++]!.promptIds).toEqual(prefix);
    prefix = [...prefix, ...segment.tokenIds];
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "rlx-e2e-rollout-"));
  writeFileSync(join(dir, "config.json"), JSON.stringify(CONFIG));
  await initModel({ configFile: join(dir, "config.json"), out: join(dir, "model"), seed: 3, dtype: "f32" });
  model = await loadModel(join(dir, "model"));
  renderer = new ChatRenderer(Tokenizer.load(join(dir, "model")), COMPACT_CHATML);
  env = await createEnv(forth, { kinds: ["gcd"], train_size: 1, eval_size: 1 });
  [task] = (await env.load("train", 0)) as [Task];
  demo = await env.demonstrate!(task);
  expect(fineTune(demo)).toBeLessThan(0.05);
}, 120_000);

afterAll(() => {
  model?.free();
  rmSync(dir, { recursive: true, force: true });
});

describe("rollout against a tiny real model", () => {
  test("a multi-turn forth episode gives a well-formed record whose logprobs the model reproduces", async () => {
    const client = new Recording(new LocalSamplingClient(model, 4));
    const rollout = await runRollout({
      id: "e2e",
      groupId: "g",
      envId: "forth",
      env,
      task,
      client,
      renderer,
      sampling: { maxTokens: 160, temperature: 0, topP: 1, topK: 0 },
    });
    expect(rollout.error).toBeUndefined();
    expect([rollout.stopReason, rollout.numTurns, rollout.policyVersion]).toEqual(["done", 2, 4]);
    expect(rollout.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant"]);
    expect(rollout.messages[2]!.tool_calls).toEqual(demo[2]!.tool_calls);
    expect(rollout.messages[3]!.content).toBe(`${task.answer} \nstack: <0>`); // the real interpreter's output
    expect(rollout.reward).toBe(1);
    expect(rollout.metrics).toMatchObject({ tool_calls: 1, tool_errors: 0, correct: 1 });
    expectWellFormed(rollout, client.requests);

    // The trainer's view: prefill logprobs of the finished sequence at the sampled positions.
    const sequence = rollout.segments.flatMap((s) => s.tokenIds);
    const [prefill] = await client.score([sequence]);
    let at = 0;
    for (const segment of rollout.segments) {
      if (segment.sampled)
        segment.logprobs!.forEach((lp, i) => expect(Math.abs(prefill![at + i]! - lp)).toBeLessThan(1e-3));
      at += segment.tokenIds.length;
    }
  }, 60_000);

  test("sampling at temperature 1 still gives a well-formed record", async () => {
    for (const seed of [1, 2]) {
      const client = new Recording(new LocalSamplingClient(model, 0));
      const rollout = await runRollout({
        id: `t1-${seed}`,
        groupId: "g",
        envId: "forth",
        env,
        task,
        client,
        renderer,
        sampling: { maxTokens: 96, temperature: 1, topP: 0.95, topK: 0, seed },
      });
      expect(rollout.error).toBeUndefined();
      expect(["done", "length", "max_turns"]).toContain(rollout.stopReason);
      expectWellFormed(rollout, client.requests);
    }
  }, 60_000);

  test("a rollout whose tool throws is recorded as an error, not a crash", async () => {
    const broken: Env = {
      ...env,
      tools: [
        {
          spec: env.tools[0]!.spec,
          run: () => {
            throw new Error("interpreter process died");
          },
        },
      ],
    };
    const rollout = await runRollout({
      id: "broken",
      groupId: "g",
      envId: "forth",
      env: broken,
      task,
      client: new LocalSamplingClient(model),
      renderer,
      sampling: { maxTokens: 160, temperature: 0, topP: 1, topK: 0 },
    });
    expect([rollout.error, rollout.stopReason, rollout.reward, rollout.metrics.error]).toEqual([
      "interpreter process died",
      "error",
      0,
      1,
    ]);
    expect(rollout.numTurns).toBe(1);
    expect(rollout.segments.filter((s) => s.sampled)[0]!.logprobs!.length).toBeGreaterThan(0);
  }, 60_000);
});
