// What every judge is (docs/algorithms.md, "Judges"): given a task, a finished rollout and the env,
// it returns a score in [0, 1] and its whole conversation (a JudgeRecord), or throws a JudgeError
// that carries the conversation so far, so a judge that fails, stalls or answers garbage is a
// failed rollout with the reason (src/rollout/driver.ts), never a score of 0.
//
// judgedEnv wraps an env so that its reward is the judge's score. The env's own (exact) reward is
// still computed and kept beside it: `exact_reward`, `judge_score`, and `judge_agrees` (1 when the
// score and the exact reward fall on the same side of 0.5) are rollout metrics, averaged per env as
// `judge/<env>/*` in metrics.jsonl, so a judge's agreement with the exact reward is measured
// in the run that uses it.
import type { JudgeRecord, Rollout, Task } from "../data/types.ts";
import type { Env } from "../envs/types.ts";
import { RlxError } from "../errors.ts";
import type { ChatClient } from "../clients/chat_client.ts";
import type { JudgeConfig } from "./schema.ts";

/** A judge's result: its score and the conversation that led to it. */
export interface Verdict {
  score: number;
  record: JudgeRecord;
  /** Counters about the judging (judge_turns, judge_tool_calls). */
  metrics: Record<string, number>;
}

/** The base of every judge, built-in or a user's file (src/judges/index.ts): its config block, a
 * connected chat client, and the env it judges (whose tools it may run). */
export abstract class Judge {
  constructor(
    readonly config: JudgeConfig,
    readonly client: ChatClient,
    readonly env: Env,
  ) {}

  /** The score of a finished rollout, or a JudgeError; `signal` fires at the env's reward timeout. */
  abstract judge(task: Task, rollout: Rollout, signal?: AbortSignal): Promise<Verdict>;
}

/** A judge that did not give a usable verdict; `judge` is its conversation so far. */
export class JudgeError extends RlxError {
  constructor(
    message: string,
    readonly judge: JudgeRecord,
  ) {
    super(message, {
      fix: "look at the judge's conversation (rollout.judge) and its prompt format (docs/algorithms.md)",
    });
  }
}

/** A verdict's score: a finite number in [0, 1], or undefined. */
export function validScore(value: unknown): number | undefined {
  const score = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
  return typeof score === "number" && Number.isFinite(score) && score >= 0 && score <= 1 ? score : undefined;
}

/** The env with its reward replaced by the judge's score (the exact reward kept as metrics). */
export function judgedEnv(env: Env, judge: Judge): Env {
  return {
    ...env,
    async reward(task, rollout, ctx) {
      const exact = await env.reward(task, rollout, ctx);
      const verdict = await judge.judge(task, rollout, ctx?.signal);
      return {
        reward: verdict.score,
        metrics: {
          ...exact.metrics,
          ...verdict.metrics,
          exact_reward: exact.reward,
          judge_score: verdict.score,
          judge_agrees: verdict.score >= 0.5 === exact.reward >= 0.5 ? 1 : 0,
        },
        judge: verdict.record,
      };
    },
  };
}
