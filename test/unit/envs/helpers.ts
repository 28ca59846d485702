// Shared by the env tests: a finished rollout holding a conversation, for reward functions
// (which read only `messages`), and the byte-tokenizer renderer.
import { byteGenerationConfig, byteTokenizerConfig, byteTokenizerJson } from "../../../src/model/byte_tokenizer.ts";
import type { ChatMessage } from "../../../src/data/chat.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";
import type { Env, RewardResult, Task } from "../../../src/envs/types.ts";
import type { Rollout } from "../../../src/data/types.ts";

export function finishedRollout(task: Task, ...replies: ChatMessage[]): Rollout {
  return {
    id: "r0",
    env: "test",
    taskId: task.id,
    groupId: "g0",
    task,
    messages: [...task.prompt, ...replies],
    segments: [],
    numSamples: 1,
    reward: 0,
    metrics: {},
    stopReason: "done",
    policyVersion: 0,
    numTurns: replies.length,
    info: {},
  };
}

export const assistant = (content: string): ChatMessage => ({ role: "assistant", content });

export function byteRenderer(template?: string): ChatRenderer {
  return new ChatRenderer(new Tokenizer(byteTokenizerJson(), byteTokenizerConfig(), byteGenerationConfig()), template);
}

/** A built-in env's reward, which is synchronous (a Promise here would be a bug in the env). */
export function rewardNow(env: Env, task: Task, rollout: Rollout): RewardResult {
  const result = env.reward(task, rollout);
  if (result instanceof Promise) throw new Error("a built-in env's reward returned a Promise");
  return result;
}
