// The rollout driver's bookkeeping, against a scripted sampling client that replays fixed
// completions as byte tokens (the model itself is exercised in test/e2e/rollout.test.ts; here the
// point is exact token layout, so the completions must be known). Checks: the extension property
// across turns, segment roles / sampled flags / logprobs / content marks, tool observations,
// stop reasons, failures recorded as data (tool throws, timeouts, context limit, bad client), and
// a template break starting a new sample.
import { describe, expect, test } from "bun:test";
import type { Env, Task } from "../../../src/envs/types.ts";
import forth, { FORTH_SYSTEM_PROMPT } from "../../../src/envs/forth/index.ts";
import math from "../../../src/envs/math/index.ts";
import { createEnv } from "../../../src/envs/index.ts";
import type { SamplingClient } from "../../../src/clients/types.ts";
import { CHATML_TEMPLATE, IM_END_ID } from "../../../src/model/byte_tokenizer.ts";
import { ScriptedClient } from "../../fixtures/scripted_client.ts";
import { runRollout, type RolloutRequest } from "../../../src/rollout/driver.ts";
import { perToken, rolloutLength, sampleRanges, type Rollout } from "../../../src/data/types.ts";
import { byteRenderer } from "../envs/helpers.ts";

const renderer = byteRenderer();
const decode = (ids: number[]) => renderer.tokenizer.decode(ids);
const call = (code: string) =>
  `<tool_call>\n{"name": "forth", "arguments": {"code": ${JSON.stringify(code)}}}\n</tool_call>`;
const sevenTask: Task = {
  id: "add",
  prompt: [
    { role: "system", content: FORTH_SYSTEM_PROMPT },
    { role: "user", content: "Use Forth to compute 3 + 4." },
  ],
  answer: "7",
  info: { numeric: true },
};
const sampling = { maxTokens: 200, temperature: 1, topP: 1, topK: 0, seed: 11 };

async function roll(
  env: Env,
  task: Task,
  client: SamplingClient,
  extra: Partial<RolloutRequest> = {},
): Promise<Rollout> {
  return runRollout({ id: "r1", groupId: "g1", envId: "forth", env, task, client, renderer, sampling, ...extra });
}

describe("rollout driver", () => {
  test("a two-turn forth episode: extension property, segments, observation, reward", async () => {
    const env = await createEnv(forth, {});
    const client = new ScriptedClient(renderer, [call("3 4 + ."), "Answer: 7"]);
    const rollout = await roll(env, sevenTask, client);

    expect(rollout.error).toBeUndefined();
    expect(rollout.stopReason).toBe("done");
    expect(rollout.reward).toBe(1);
    expect(rollout.metrics).toEqual({
      tool_calls: 1,
      tool_errors: 0,
      malformed_tool_calls: 0,
      num_turns: 2,
      truncated: 0,
      correct: 1,
      formatted: 1,
      answered: 1,
    });
    expect([rollout.numTurns, rollout.numSamples, rollout.policyVersion]).toEqual([2, 1, 7]);
    expect(rollout.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant"]);
    expect(rollout.messages[3]!.content).toBe("7 \nstack: <0>");

    // Tokens in, tokens out: turn 2's prompt is turn 1's prompt + its completion + the observation.
    const [first, second] = client.requests;
    const completion1 = rollout.segments.find((s) => s.sampled)!.tokenIds;
    expect(second!.promptIds.slice(0, first!.promptIds.length + completion1.length)).toEqual([
      ...first!.promptIds,
      ...completion1,
    ]);
    const all = rollout.segments.flatMap((s) => s.tokenIds);
    const completion2 = rollout.segments.filter((s) => s.sampled)[1]!.tokenIds;
    expect(all).toEqual([...second!.promptIds, ...completion2]);
    // With completions formatted as the template would, the episode is the template's rendering.
    const rendered = renderer.render(rollout.messages, {
      tools: env.tools.map((t) => t.spec),
      addGenerationPrompt: false,
    });
    expect(all).toEqual(rendered.tokenIds.slice(0, -1)); // minus the "\n" the template puts after the last <|im_end|>
    expect(second!.stop).toEqual(renderer.tokenizer.stopIds);
    expect([first!.seed, second!.seed]).toEqual([11, 12]);

    expect(rollout.segments.map((s) => [s.role, s.sampled, s.messageIndex])).toEqual([
      ["system", false, 0],
      ["user", false, 1],
      ["assistant", false, 2], // generation prompt
      ["assistant", true, 2],
      ["assistant", false, 2], // "\n" after <|im_end|>
      ["tool", false, 3],
      ["assistant", false, 4],
      ["assistant", true, 4],
    ]);
    for (const segment of rollout.segments) {
      expect(segment.isContent!.length).toBe(segment.tokenIds.length);
      expect(segment.sample).toBe(0);
      if (segment.sampled) {
        expect(segment.logprobs!.length).toBe(segment.tokenIds.length);
        expect([segment.policyVersion, segment.temperature]).toEqual([7, 1]);
        expect(segment.isContent!.at(-1)).toBe(false); // the stop token
      } else {
        expect(segment.logprobs).toBeUndefined();
      }
    }
    const tool = rollout.segments[5]!;
    expect(decode(tool.tokenIds.filter((_, i) => tool.isContent![i]))).toBe("7 \nstack: <0>");
    expect(decode(tool.tokenIds)).toBe(
      "<|im_start|>user\n<tool_response>\n7 \nstack: <0>\n</tool_response><|im_end|>\n",
    );

    // Helpers the algorithms layer uses to annotate per token.
    expect(rolloutLength(rollout)).toBe(all.length);
    expect(perToken<number>(rollout, (s) => (s.sampled ? 1 : 0)).reduce((a, b) => a + b, 0)).toBe(
      completion1.length + completion2.length,
    );
    expect(sampleRanges(rollout)).toEqual([[0, all.length]]);
  });

  test("a tool that throws fails the rollout, recorded with its error and reward 0", async () => {
    const env: Env = {
      tools: [
        {
          spec: { type: "function", function: { name: "forth", description: "", parameters: {} } },
          run: () => {
            throw new Error("sandbox crashed");
          },
        },
      ],
      maxTurns: 4,
      load: async () => [],
      reward: () => ({ reward: 1, metrics: {} }),
    };
    const rollout = await roll(env, sevenTask, new ScriptedClient(renderer, [call("1")]));
    expect(rollout.error).toBe("sandbox crashed");
    expect([rollout.stopReason, rollout.reward, rollout.metrics.error, rollout.numTurns]).toEqual(["error", 0, 1, 1]);
    expect(rollout.segments.filter((s) => s.sampled).length).toBe(1);
  });

  test("malformed and unknown tool calls become error observations and are counted", async () => {
    const env = await createEnv(forth, {});
    const client = new ScriptedClient(renderer, [
      '<tool_call>{"name": forth}</tool_call>\n<tool_call>{"name": "python", "arguments": {}}</tool_call>',
      "Answer: 7",
    ]);
    const rollout = await roll(env, sevenTask, client);
    expect(rollout.error).toBeUndefined();
    expect(rollout.messages.slice(3, 5).map((m) => m.content)).toEqual([
      expect.stringMatching(/^error: tool call is not valid JSON/),
      'error: unknown tool "python" (available: forth)',
    ]);
    expect(rollout.metrics).toMatchObject({ tool_calls: 1, tool_errors: 2, malformed_tool_calls: 1, correct: 1 });
  });

  test("max_turns ends the episode after the observation, without a generation prompt", async () => {
    const env = await createEnv(forth, { max_turns: 2 });
    const rollout = await roll(env, sevenTask, new ScriptedClient(renderer, [call("1 ."), call("2 .")]));
    expect([rollout.stopReason, rollout.numTurns, rollout.reward, rollout.metrics.truncated]).toEqual([
      "max_turns",
      2,
      0,
      1,
    ]);
    const last = rollout.segments.at(-1)!;
    expect([last.role, last.sampled]).toEqual(["tool", false]);
    expect(decode(last.tokenIds).endsWith("</tool_response><|im_end|>\n")).toBe(true);
  });

  test("a completion cut at max tokens stops the episode with reason length", async () => {
    const env = await createEnv(forth, {});
    const rollout = await roll(
      env,
      sevenTask,
      new ScriptedClient(renderer, [{ text: '<tool_call>\n{"name"', finish: "length" }]),
    );
    expect([rollout.stopReason, rollout.error, rollout.reward, rollout.metrics.truncated]).toEqual([
      "length",
      undefined,
      0,
      1,
    ]);
  });

  test("the context limit bounds max tokens, then fails the rollout when the prompt no longer fits, or ends it (context_limit truncate)", async () => {
    const env = await createEnv(forth, {});
    const firstTurn = call("1 2 3 4 5 6 7 8 9 + + + + + + + + .");
    const client = new ScriptedClient(renderer, [firstTurn, "Answer: 45"]);
    const promptLength = renderer.render(sevenTask.prompt, {
      tools: env.tools.map((t) => t.spec),
      addGenerationPrompt: true,
    }).tokenIds.length;
    const completionLength = renderer.tokenizer.encodePlain(firstTurn).length + 1;
    const rollout = await roll(env, sevenTask, client, { maxContextTokens: promptLength + completionLength + 5 });
    expect(client.requests[0]!.maxTokens).toBe(completionLength + 5);
    expect(client.requests.length).toBe(1); // the observation pushed turn 2's prompt past the limit
    expect(rollout.error).toMatch(
      /^context limit: the prompt has \d+ tokens, max_context_tokens is \d+; set the env's context_limit = "truncate"/,
    );
    expect(rollout.reward).toBe(0);
    // context_limit = "truncate": the episode ends there and is scored as it stands
    const ended = await roll(env, sevenTask, new ScriptedClient(renderer, [firstTurn, "Answer: 45"]), {
      maxContextTokens: promptLength + completionLength + 5,
      contextLimit: "truncate",
    });
    expect(ended.error).toBeUndefined();
    expect(ended.stopReason).toBe("context");
    expect(ended.numTurns).toBe(1);
    expect(ended.metrics.truncated).toBe(1);
    // a first prompt past the limit is the config's error whatever the policy
    const tooLong = await roll(env, sevenTask, new ScriptedClient(renderer, ["Answer: 45"]), {
      maxContextTokens: promptLength,
      contextLimit: "truncate",
    });
    expect(tooLong.error).toMatch(/^context limit: the prompt has \d+ tokens, max_context_tokens is \d+$/);
  });

  test("a client that never answers times out into an error rollout", async () => {
    const env = await createEnv(forth, {});
    const hanging: SamplingClient = { complete: () => new Promise(() => {}), score: async () => [] };
    const start = performance.now();
    const rollout = await roll(env, sevenTask, hanging, { timeoutMs: 50 });
    expect(rollout.error).toBe("rollout timed out (timeout 50 ms)");
    expect(performance.now() - start).toBeLessThan(10_000); // a hang never ends; load cannot reach this
  });

  test("a client returning mismatched logprobs is an error, not bad training data", async () => {
    const env = await createEnv(math, {});
    const broken: SamplingClient = {
      complete: async () => ({ tokenIds: [65, IM_END_ID], logprobs: [-1], finishReason: "stop", policyVersion: 0 }),
      score: async () => [],
    };
    const rollout = await roll(env, sevenTask, broken);
    expect(rollout.error).toBe("sampling client returned 2 tokens but 1 logprobs");
  });

  test("single-turn math: one sampled turn, reward from the boxed answer", async () => {
    const env = await createEnv(math, {});
    const [task] = await env.load("eval", 0);
    const rollout = await roll(env, task!, new ScriptedClient(renderer, [`\\boxed{${task!.answer}}`, "unused"]), {
      envId: "math",
    });
    expect([rollout.stopReason, rollout.numTurns, rollout.reward, rollout.env]).toEqual(["done", 1, 1, "math"]);
    expect(rollout.segments.map((s) => s.sampled)).toEqual([false, false, true]);
  });

  test("a template that rewrites an earlier turn starts a new sample and says so", async () => {
    const dropping = CHATML_TEMPLATE.replace(
      "{%- if message.content %}{{- message.content }}{%- endif %}",
      "{%- if loop.last and message.reasoning_content %}{{- '<think>' + message.reasoning_content + '</think>' }}{%- endif %}{%- if message.content %}{{- message.content }}{%- endif %}",
    );
    const thinking = byteRenderer(dropping);
    const env = await createEnv(forth, {});
    const client = new ScriptedClient(thinking, [`<think>add</think>${call("3 4 + .")}`, "Answer: 7"]);
    const rollout = await runRollout({
      id: "r",
      groupId: "g",
      envId: "forth",
      env,
      task: sevenTask,
      client,
      renderer: thinking,
      sampling,
    });
    expect(rollout.error).toBeUndefined();
    expect(rollout.numSamples).toBe(2);
    expect(rollout.info.extensionBreaks).toEqual([{ turn: 1, sample: 1 }]);
    const [first, second] = client.requests;
    // Sample 1 is a fresh rendering (the old reasoning gone), and turn 2 was prompted with exactly it.
    const sample1 = rollout.segments.filter((s) => s.sample === 1);
    expect([...sample1.filter((s) => !s.sampled).flatMap((s) => s.tokenIds)]).toEqual(second!.promptIds);
    expect(decode(second!.promptIds)).not.toContain("<think>");
    expect(decode(first!.promptIds).length).toBeLessThan(decode(second!.promptIds).length);
    // The earlier assistant turn is context in sample 1 (not sampled), and each sample has one sampled turn.
    expect(sample1.filter((s) => s.sampled).length).toBe(1);
    expect(rollout.segments.filter((s) => s.sample === 0 && s.sampled).length).toBe(1);
    const ranges = sampleRanges(rollout);
    expect(ranges.length).toBe(2);
    expect(ranges[1]![1]).toBe(rolloutLength(rollout));
    expect(rollout.reward).toBe(1);
  });

  test("a reward function that throws is recorded as an error", async () => {
    const env = {
      ...(await createEnv(math, {})),
      reward: () => {
        throw new Error("grader down");
      },
    };
    const rollout = await roll(env, sevenTask, new ScriptedClient(renderer, ["7"]));
    expect([rollout.error, rollout.reward, rollout.stopReason]).toEqual(["reward failed: grader down", 0, "error"]);
  });
});
