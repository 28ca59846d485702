// The agentic judge: a multi-turn loop in which the judge model reads the rollout on demand and
// checks its work with the env's own tools, then ends with a verdict tool call. Its tools:
//
//   read_message(index)       message `index` of the rollout (as numbered in the audit record)
//   <the env's tools>         run with the rollout's task, e.g. forth(code) runs a Forth program,
//                             search(query) searches the search env's corpus
//   verdict(score, reason)    ends the loop; score a number in [0, 1]
//
// It starts with the task, the reference answer and an overview of the conversation (one line per
// message). A reply without a tool call is answered with a reminder; a bad call (unknown tool, bad
// arguments, a score outside [0, 1]) with an error observation. No verdict within `max_turns`
// replies fails the rollout (a JudgeError with the conversation). Every message is kept in the
// JudgeRecord, which the audit record carries next to the rollout.
import type { JudgeRecord, Rollout, Task } from "../data/types.ts";
import { hashString } from "../envs/random.ts";
import { runToolCall } from "../envs/tools.ts";
import type { Env } from "../envs/types.ts";
import type { ChatClient } from "../clients/chat_client.ts";
import type { ChatMessage, ToolCall, ToolSpec } from "../data/chat.ts";
import { Judge, JudgeError, validScore, type Verdict } from "./judge.ts";
import type { JudgeConfig } from "./schema.ts";
import { messageText, taskText, traceOverview } from "./trace.ts";

export const AGENTIC_SYSTEM_PROMPT = `You are a judge with tools. An AI assistant tried the task below; its conversation is listed by message index. Read the messages you need with read_message, check the assistant's work by running the environment's tools yourself, then call verdict exactly once with a score from 0 (wrong) to 1 (fully correct) and a short reason.`;

const fn = (name: string, description: string, properties: Record<string, unknown>): ToolSpec => ({
  type: "function",
  function: { name, description, parameters: { type: "object", properties, required: Object.keys(properties) } },
});

export const READ_MESSAGE_TOOL = fn("read_message", "Read one message of the assistant's conversation by index.", {
  index: { type: "integer", description: "the message index, as in the overview" },
});
export const VERDICT_TOOL = fn("verdict", "Give the final score and end the judging.", {
  score: { type: "number", description: "0 (wrong) to 1 (fully correct)" },
  reason: { type: "string", description: "one sentence" },
});
const JUDGE_TOOLS = new Set(["read_message", "verdict"]);

export class AgenticJudge extends Judge {
  constructor(config: JudgeConfig, client: ChatClient, env: Env) {
    super(config, client, env);
    const clash = env.tools.find((t) => JUDGE_TOOLS.has(t.spec.function.name));
    if (clash)
      throw new Error(`the env has a tool named "${clash.spec.function.name}", which the judge's own tool uses`);
  }

  async judge(task: Task, rollout: Rollout, signal?: AbortSignal): Promise<Verdict> {
    const messages: ChatMessage[] = [
      { role: "system", content: AGENTIC_SYSTEM_PROMPT },
      {
        role: "user",
        content: `${taskText(task)}\n\nCONVERSATION OVERVIEW (the final message is [${rollout.messages.length - 1}]):\n${traceOverview(rollout.messages)}`,
      },
    ];
    const record: JudgeRecord = { kind: "agentic", model: this.client.model, messages };
    const tools = [READ_MESSAGE_TOOL, ...this.env.tools.map((t) => t.spec), VERDICT_TOOL];
    let toolCalls = 0;
    for (let turn = 0; turn < this.config.max_turns; turn++) {
      const reply = await this.client.chat({
        messages,
        tools,
        maxTokens: this.config.max_tokens,
        temperature: this.config.temperature,
        seed: hashString(`judge:${rollout.id}:${turn}`),
        signal,
      });
      messages.push(reply.message);
      const calls = reply.message.tool_calls ?? [];
      if (calls.length === 0) {
        messages.push({ role: "user", content: "Call a tool: read_message, the environment's tools, or verdict." });
        continue;
      }
      for (const [i, call] of calls.entries()) {
        toolCalls++;
        if (call.function.name === "verdict") {
          const score = validScore(call.function.arguments.score);
          if (score !== undefined) {
            const reason = String(call.function.arguments.reason ?? "");
            const metrics = { judge_turns: turn + 1, judge_tool_calls: toolCalls };
            return { score, record: { ...record, score, reason }, metrics };
          }
        }
        messages.push({ role: "tool", name: call.function.name, tool_call_id: `call_${i}`, content: "" });
        messages.at(-1)!.content = await this.runTool(call, task, rollout);
      }
    }
    throw new JudgeError(
      `the agentic judge gave no verdict in ${this.config.max_turns} turns (judge.max_turns)`,
      record,
    );
  }

  /** The observation for one of the judge's tool calls (never a verdict with a valid score). */
  private async runTool(call: ToolCall, task: Task, rollout: Rollout): Promise<string> {
    const { name, arguments: args } = call.function;
    if ("__unparsed" in args) return `error: the arguments are not a JSON object: ${String(args.__unparsed)}`;
    if (name === "verdict") return "error: score must be a number from 0 to 1";
    if (name === "read_message") {
      const index = args.index;
      const last = rollout.messages.length - 1;
      if (typeof index !== "number" || !Number.isInteger(index) || index < 0 || index > last)
        return `error: index must be an integer from 0 to ${last}`;
      const message = rollout.messages[index]!;
      return `[${index}] ${message.role}${message.name ? ` (${message.name})` : ""}:\n${messageText(message)}`;
    }
    if (!this.env.tools.some((t) => t.spec.function.name === name)) {
      const known = ["read_message", ...this.env.tools.map((t) => t.spec.function.name), "verdict"].join(", ");
      return `error: unknown tool "${name}" (available: ${known})`;
    }
    return (await runToolCall(this.env.tools, call, task)).message.content;
  }
}
