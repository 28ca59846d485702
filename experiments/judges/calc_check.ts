// A lean agentic judge for the calc env (src/envs/calc): it reads the rollout as one line, checks
// the rollout's claims with a checking calculator, and gives a verdict that also names the decisive
// turn. Short enough for the tiny byte-level models of these experiments to be taught it
// (experiments/scripts/judge_calc_demos.ts writes the demonstrations from the env's exact checker),
// where the built-in agentic judge's prompt is a paragraph of instructions and a JSON tool-call
// format. Its model's work is reading: which numbers the task adds, which number the rollout
// finally claims, what its calculator call added; the checker does the arithmetic, as a code judge
// runs the tests:
//
//   user:    47+18+25= | 47+19 | =66 | +25=91 ?    the rollout's messages (the task's prompt first)
//   judge:   47+18+25=91                           a check: the task's sum against the final claim
//   tool:    wrong
//   judge:   47+18=66                              the task's first two numbers against the call's sum
//   tool:    wrong
//   judge:   no 1                                  `yes` (score 1), or `no K` (score 0) with K the
//                                                  policy's turn that decided it (here the call), or `no`
//
// A check is `numbers joined by + = number` (the claim may be empty: an answer with no number),
// answered `right` or `wrong`; anything else that is not a verdict is answered `?` and the judge
// goes on. No verdict within judge.max_turns replies fails the rollout with the conversation (never
// a score of 0). The same conversation serves agentic credit (experiments/algorithms/calc_credit.ts),
// which reads K.
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

/** The judge's checker: `right` when the numbers joined by `+` add up to the claim after `=`,
 * `wrong` when they do not (or the claim is empty), `?` for anything else. */
export function check(call: string): string {
  const match = /^(\d{1,9}(?:\+\d{1,9})*)=(\d{0,10})$/.exec(call.trim());
  if (!match) return "?";
  const sum = match[1]!.split("+").reduce((total, x) => total + Number(x), 0);
  return match[2] !== "" && Number(match[2]) === sum ? "right" : "wrong";
}

/** A verdict: its score, and the decisive turn a `no K` names. */
export interface CalcVerdict {
  score: number;
  turn?: number;
}

/** The verdict a reply gives; undefined for anything else (a call). */
export function verdictOf(reply: string): CalcVerdict | undefined {
  const words = /^(yes|no)(?: ([1-9]))?$/.exec(reply.trim().toLowerCase());
  if (!words || (words[1] === "yes" && words[2])) return undefined;
  return words[1] === "yes" ? { score: 1 } : { score: 0, ...(words[2] && { turn: Number(words[2]) }) };
}

/** One judging conversation: the messages so far, and the verdict or undefined after `maxTurns` replies. */
export async function converse(
  client: ChatClient,
  rollout: Pick<Rollout, "messages">,
  options: { maxTokens: number; temperature: number; maxTurns: number; signal?: AbortSignal },
): Promise<{ messages: ChatMessage[]; verdict?: CalcVerdict; calls: number; turns: number }> {
  const messages: ChatMessage[] = [{ role: "user", content: judgeQuestion(rollout) }];
  let calls = 0;
  for (let turn = 1; turn <= options.maxTurns; turn++) {
    const { maxTokens, temperature, signal } = options;
    const reply = await client.chat({ messages, maxTokens, temperature, ...(signal && { signal }) });
    messages.push({ role: "assistant", content: reply.message.content });
    const verdict = verdictOf(reply.message.content);
    if (verdict) return { messages, verdict, calls, turns: turn };
    calls++;
    messages.push({ role: "tool", content: check(reply.message.content) });
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
