// The rubric judge: one chat call with the task, the reference answer and the rollout's
// conversation (messages numbered as in the audit record), answered in text. Output format: the
// reply ends with a line `SCORE: x`, x a number in [0, 1]; the last such line counts. A reply
// without one (or with x outside [0, 1]) is garbage: the rollout fails with the reply's start.
import type { Rollout, Task } from "../data/types.ts";
import { hashString } from "../envs/random.ts";
import type { ChatMessage } from "../data/chat.ts";
import { Judge, JudgeError, validScore, type Verdict } from "./judge.ts";
import { numberedTrace, taskText } from "./trace.ts";

export const RUBRIC_SYSTEM_PROMPT = `You grade an AI assistant's attempt at a task. You are given the task, the reference answer and the assistant's conversation, its messages numbered. Decide whether the assistant's final answer is correct and supported by its work. Explain briefly, then end your reply with one line of the form
SCORE: x
where x is a number from 0 (wrong) to 1 (fully correct).`;

const SCORE_LINE = /^\s*SCORE:\s*(\S+)\s*$/gim;

/** The score of a rubric reply: the last `SCORE: x` line's x, if it is a number in [0, 1]. */
export function parseRubricScore(text: string): number | undefined {
  const matches = [...text.matchAll(SCORE_LINE)];
  return validScore(matches.at(-1)?.[1]);
}

export class RubricJudge extends Judge {
  async judge(task: Task, rollout: Rollout, signal?: AbortSignal): Promise<Verdict> {
    const messages: ChatMessage[] = [
      { role: "system", content: RUBRIC_SYSTEM_PROMPT },
      {
        role: "user",
        content: `${taskText(task)}\n\nCONVERSATION:\n${numberedTrace(rollout.messages, task.prompt.length)}`,
      },
    ];
    const record = { kind: "rubric", model: this.client.model, messages };
    const reply = await this.client.chat({
      messages,
      maxTokens: this.config.max_tokens,
      temperature: this.config.temperature,
      seed: hashString(`judge:${rollout.id}`),
      signal,
    });
    messages.push(reply.message);
    const score = parseRubricScore(reply.message.content);
    if (score === undefined)
      throw new JudgeError(
        `the rubric judge's reply has no "SCORE: x" line with x in [0, 1]: ${JSON.stringify(reply.message.content.slice(0, 200))}`,
        record,
      );
    return { score, record: { ...record, score }, metrics: { judge_turns: 1 } };
  }
}
