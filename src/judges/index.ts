// The judge registry: a judge block's `type` -> the judge (docs/algorithms.md, "Judges"). A
// built-in judge is one file extending `Judge` (judge.ts) and one line of BUILTIN_JUDGES; a user's
// judge is one .ts file (`type = "custom"`, `path`) whose default export receives the kit below
// and returns a class extending the kit's Judge, so it works with the compiled binary:
//
//   export default ({ Judge, validScore }) => class Strict extends Judge { async judge(task, rollout, signal) {...} };
import { runToolCall } from "../envs/tools.ts";
import type { Env } from "../envs/types.ts";
import type { ChatClient } from "../clients/chat_client.ts";
import { loadPluginClass } from "../plugin.ts";
import { AgenticJudge } from "./agentic.ts";
import { Judge, JudgeError, validScore } from "./judge.ts";
import { parseRubricScore, RubricJudge } from "./rubric.ts";
import type { JudgeConfig } from "./schema.ts";
import { messageText, numberedTrace, taskText, traceOverview } from "./trace.ts";

type JudgeClass = new (config: JudgeConfig, client: ChatClient, env: Env) => Judge;

export const BUILTIN_JUDGES: Record<"rubric" | "agentic", JudgeClass> = {
  rubric: RubricJudge,
  agentic: AgenticJudge,
};

/** What a custom judge's factory receives. */
export const judgeKit = {
  Judge,
  JudgeError,
  validScore,
  parseRubricScore,
  messageText,
  numberedTrace,
  traceOverview,
  taskText,
  runToolCall,
};
export type JudgeKit = typeof judgeKit;

/** The judge a config block names, over a connected chat client, for an env (its tools); `at`
 * names the block for errors ("run.toml: orchestrator.train.env[0].judge"). */
export async function createJudge(config: JudgeConfig, client: ChatClient, env: Env, at: string): Promise<Judge> {
  if (config.type !== "custom") return new BUILTIN_JUDGES[config.type](config, client, env);
  const shape =
    "export default ({ Judge }) => class extends Judge { async judge(task, rollout, signal) {...} } (docs/algorithms.md)";
  const cls = (await loadPluginClass(config.path!, `${at}.path`, { base: Judge, kit: judgeKit, shape })) as JudgeClass;
  return new cls(config, client, env);
}
