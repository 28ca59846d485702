// Shared by the judge and credit tests: real forth rollouts through the rollout driver, the byte
// tokenizer and the ChatML template, with a scripted policy (so the tokens are known), and the
// rule of a scripted agentic judge that checks the policy's Forth by running it.
import forth, { FORTH_SYSTEM_PROMPT } from "../../../src/envs/forth/index.ts";
import { createEnv } from "../../../src/envs/index.ts";
import type { Env } from "../../../src/envs/types.ts";
import type { CallGate } from "../../../src/clients/gate.ts";
import type { Completion, CompletionRequest, SamplingClient } from "../../../src/clients/types.ts";
import {
  byteGenerationConfig,
  byteTokenizerConfig,
  byteTokenizerJson,
  IM_END_ID,
} from "../../../src/model/byte_tokenizer.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";
import { runRollout } from "../../../src/rollout/driver.ts";
import type { ChatBody, JudgeReply } from "../../fixtures/judge_server.ts";

export const tokenizer = new Tokenizer(byteTokenizerJson(), byteTokenizerConfig(), byteGenerationConfig());
export const renderer = new ChatRenderer(tokenizer);

/** Replays completions as byte tokens + <|im_end|>, logprob -0.1 each, each after `delayMs`. */
export class ScriptedPolicy implements SamplingClient {
  constructor(
    private readonly replies: string[],
    private readonly delayMs = 0,
  ) {}
  async complete(_: CompletionRequest): Promise<Completion> {
    if (this.delayMs) await Bun.sleep(this.delayMs);
    const tokenIds = [...tokenizer.encodePlain(this.replies.shift()!), IM_END_ID];
    return { tokenIds, logprobs: tokenIds.map(() => -0.1), finishReason: "stop", policyVersion: 1 };
  }
  async score(): Promise<number[][]> {
    throw new Error("unused");
  }
}

export const forthCall = (code: string) =>
  `<tool_call>\n{"name": "forth", "arguments": {"code": ${JSON.stringify(code)}}}\n</tool_call>`;

export const forthTask = {
  id: "add",
  prompt: [
    { role: "system" as const, content: FORTH_SYSTEM_PROMPT },
    { role: "user" as const, content: "Use Forth to compute 3 + 4." },
  ],
  answer: "7",
  info: { numeric: true },
};

export const forthEnv = (): Promise<Env> => createEnv(forth, {});

/** One forth rollout whose policy replies `replies` in turn, scored by `env` (through `gate`). */
export async function forthRollout(id: string, replies: string[], env?: Env, gate?: CallGate, delayMs = 0) {
  return runRollout({
    id,
    groupId: "g",
    envId: "forth",
    env: env ?? (await forthEnv()),
    task: forthTask,
    client: new ScriptedPolicy(replies, delayMs),
    renderer,
    sampling: { maxTokens: 200, temperature: 1, topP: 1, topK: 0 },
    ...(gate ? { rewardGate: gate } : {}),
  });
}

/**
 * A scripted agentic judge that checks the policy's Forth: it reads every assistant message that
 * made a call (from the overview), runs the first Forth program it finds with the env's own tool,
 * and gives score 1 when the program printed the reference answer, else 0.
 */
export function forthJudgeRule(body: ChatBody): JudgeReply {
  const user = body.messages.find((m) => m.role === "user")!.content;
  const reference = /REFERENCE ANSWER:\n(.*)/.exec(user)![1]!;
  const tools = body.messages.filter((m) => m.role === "tool");
  const toRead = [...user.matchAll(/^\[(\d+)\] assistant: \d+ chars, calls forth$/gm)].map((m) => Number(m[1]));
  if (tools.length < toRead.length)
    return { tool_calls: [{ name: "read_message", arguments: { index: toRead[tools.length]! } }] };
  const ran = tools.find((m) => m.name === "forth");
  const code = tools.map((m) => /tool call: forth\((.*)\)/.exec(m.content)?.[1]).find(Boolean);
  if (!ran && code) return { tool_calls: [{ name: "forth", arguments: JSON.parse(code) }] };
  const printed = ran?.content.split("\n")[0]?.trim();
  const score = printed === reference ? 1 : 0;
  return { content: "checked", tool_calls: [{ name: "verdict", arguments: { score, reason: `printed ${printed}` } }] };
}
