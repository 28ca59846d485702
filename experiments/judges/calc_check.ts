// A lean agentic judge for the calc env (src/envs/calc): it reads the rollout as one scratchpad line,
// checks it with a calculator of its own, and gives a verdict that also names the decisive turn.
// Short enough for the tiny byte-level models of these experiments to be taught it
// (experiments/scripts/judge_calc_demos.ts writes the demonstrations from the env's exact checker),
// where the built-in agentic judge's prompt is a paragraph of instructions and a JSON tool-call format:
//
//   user:    47+18+25= | 47+19 | =66 | +25=91 ?    the rollout's messages (the task's prompt first), one line
//   judge:   47+18+25                      a call: numbers joined by `+`, which the judge's calculator adds
//   tool:    =90
//   judge:   no 1                          `yes` (score 1), or `no K` (score 0), K the policy's turn
//                                          that decided it (here the call), or `no`
//
// A reply that is neither a call nor a verdict gets `=?` and the judge goes on; no verdict within
// judge.max_turns replies fails the rollout with the conversation (never a score of 0). The same
// conversation serves agentic credit (experiments/algorithms/calc_credit.ts), which reads K.
//
//   judge = { type = "custom", path = "experiments/judges/calc_check.ts", name = "judge", base_url = "...", max_tokens = 16 }
import type { JudgeKit } from "../../src/judges/index.ts";
import type { ChatClient } from "../../src/clients/chat_client.ts";
import type { ChatMessage } from "../../src/data/chat.ts";
import type { Rollout, Task } from "../../src/data/types.ts";

/** The judge's first message: the rollout's messages (the task's prompt first) on one line, ` | `
 * between them, so that a turn boundary (a call, or the scratchpad written whole) can be read. */
export function judgeQuestion(rollout: Pick<Rollout, "messages">): string {
  return `${rollout.messages.map((m) => m.content).join(" | ")} ?`;
}

/** The judge's calculator: `=<sum>` of numbers joined by `+`, `=?` for anything else. */
export function addAll(call: string): string {
  const terms = call.trim();
  return /^\d{1,9}(\+\d{1,9})*$/.test(terms) ? `=${terms.split("+").reduce((sum, x) => sum + Number(x), 0)}` : "=?";
}

/** A verdict: its score, and the decisive turn a `no K` names; undefined for anything else (a call). */
export function verdictOf(reply: string): { score: number; turn?: number } | undefined {
  const words = /^(yes|no)(?: ([1-9]))?$/.exec(reply.trim().toLowerCase());
  if (!words || (words[1] === "yes" && words[2])) return undefined;
  return words[1] === "yes" ? { score: 1 } : { score: 0, ...(words[2] && { turn: Number(words[2]) }) };
}

/** One judging conversation: the messages so far, and the verdict or undefined after `maxTurns` replies. */
export async function converse(
  client: ChatClient,
  rollout: Pick<Rollout, "messages">,
  options: { maxTokens: number; temperature: number; maxTurns: number; signal?: AbortSignal },
): Promise<{ messages: ChatMessage[]; verdict?: { score: number; turn?: number }; calls: number; turns: number }> {
  const messages: ChatMessage[] = [{ role: "user", content: judgeQuestion(rollout) }];
  let calls = 0;
  for (let turn = 1; turn <= options.maxTurns; turn++) {
    const { maxTokens, temperature, signal } = options;
    const reply = await client.chat({ messages, maxTokens, temperature, ...(signal && { signal }) });
    messages.push({ role: "assistant", content: reply.message.content });
    const verdict = verdictOf(reply.message.content);
    if (verdict) return { messages, verdict, calls, turns: turn };
    calls++;
    messages.push({ role: "tool", content: addAll(reply.message.content) });
  }
  return { messages, calls, turns: options.maxTurns };
}

export default ({ Judge, JudgeError }: JudgeKit) =>
  class CalcCheck extends Judge {
    override async judge(_task: Task, rollout: Rollout, signal?: AbortSignal) {
      const { max_tokens, temperature, max_turns } = this.config;
      const options = { maxTokens: max_tokens, temperature, maxTurns: max_turns, ...(signal && { signal }) };
      const { messages, verdict, calls, turns } = await converse(this.client, rollout, options);
      const record = { kind: "calc_check", model: this.client.model, messages };
      if (!verdict)
        throw new JudgeError(`the calc judge gave no verdict in ${max_turns} replies (judge.max_turns)`, record);
      const { score } = verdict;
      return { score, record: { ...record, score }, metrics: { judge_turns: turns, judge_tool_calls: calls } };
    }
  };
