// A lean agentic judge for the calc env (src/envs/calc): it reads the rollout as one scratchpad line,
// checks it with a calculator of its own, and gives a verdict. Short enough for the tiny byte-level
// models of these experiments to be taught it (experiments/scripts/judge_calc_demos.ts writes the
// demonstrations from the env's exact checker), where the built-in agentic judge's prompt is a
// paragraph of instructions and a JSON tool-call format:
//
//   user:    47+18+25=47+18=65+25=90 ?     the task's prompt and the rollout's turns, as the policy saw them
//   judge:   47+18+25                      a call: numbers joined by `+`, which the judge's calculator adds
//   tool:    =90
//   judge:   yes                           the verdict: `yes` (score 1) or `no` (score 0)
//
// A reply that is neither a call nor a verdict gets `=?` and the judge goes on; no verdict within
// judge.max_turns replies fails the rollout with the conversation (never a score of 0).
//
//   judge = { type = "custom", path = "experiments/judges/calc_check.ts", name = "judge", base_url = "...", max_tokens = 16 }
import type { JudgeKit } from "../../src/judges/index.ts";
import type { Rollout, Task } from "../../src/data/types.ts";
import type { ChatMessage } from "../../src/data/chat.ts";

/** The judge's first message: the rollout's messages (the task's prompt first) as one line. */
export function judgeQuestion(rollout: Pick<Rollout, "messages">): string {
  return `${rollout.messages.map((m) => m.content).join("")} ?`;
}

/** The judge's calculator: `=<sum>` of numbers joined by `+`, `=?` for anything else. */
export function addAll(call: string): string {
  const terms = call.trim();
  return /^\d{1,9}(\+\d{1,9})*$/.test(terms) ? `=${terms.split("+").reduce((sum, x) => sum + Number(x), 0)}` : "=?";
}

/** `yes` -> 1, `no` -> 0, anything else (a call) -> undefined. */
export function verdictOf(reply: string): number | undefined {
  const word = reply.trim().toLowerCase();
  return word === "yes" ? 1 : word === "no" ? 0 : undefined;
}

export default ({ Judge, JudgeError }: JudgeKit) =>
  class CalcCheck extends Judge {
    override async judge(_task: Task, rollout: Rollout, signal?: AbortSignal) {
      const messages: ChatMessage[] = [{ role: "user", content: judgeQuestion(rollout) }];
      const record = { kind: "calc_check", model: this.client.model, messages };
      let calls = 0;
      for (let turn = 0; turn < this.config.max_turns; turn++) {
        const reply = await this.client.chat({
          messages,
          maxTokens: this.config.max_tokens,
          temperature: this.config.temperature,
          signal,
        });
        messages.push({ role: "assistant", content: reply.message.content });
        const score = verdictOf(reply.message.content);
        if (score !== undefined)
          return { score, record: { ...record, score }, metrics: { judge_turns: turn + 1, judge_tool_calls: calls } };
        calls++;
        messages.push({ role: "tool", content: addAll(reply.message.content) });
      }
      throw new JudgeError(
        `the calc judge gave no yes/no in ${this.config.max_turns} replies (judge.max_turns)`,
        record,
      );
    }
  };
