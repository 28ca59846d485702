// The judge registry: a judge block's `type` -> the judge (docs/algorithms.md, "Judges"). A
// built-in judge is one file extending `Judge` (judge.ts) and one line of BUILTIN_JUDGES; a user's
// judge is one .ts file (`type = "custom"`, `path`) whose default export receives the kit below
// and returns a class extending the kit's Judge, so it works with the compiled binary:
//
//   export default ({ Judge, validScore }) => class Strict extends Judge { async judge(task, rollout, signal) {...} };
import { runToolCall } from "../envs/tools.ts";
import type { Env } from "../envs/types.ts";
import type { ChatClient } from "../clients/chat_client.ts";
import { type FactoryKind, keySite, loadPlugin, type PluginSite } from "../plugin.ts";
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

/** A custom judge file, for the plugin loader: its factory gets the kit and returns a Judge class. */
export const judgePlugin: FactoryKind = {
  base: Judge,
  kit: judgeKit,
  shape:
    "export default ({ Judge }) => class extends Judge { async judge(task, rollout, signal) {...} } (docs/algorithms.md)",
};

/** The judge a config block names, over a connected chat client, for an env (its tools); `site`
 * is the block's, for errors (run.toml, orchestrator.train.env[0].judge). */
export async function createJudge(config: JudgeConfig, client: ChatClient, env: Env, site: PluginSite): Promise<Judge> {
  if (config.type !== "custom") return new BUILTIN_JUDGES[config.type](config, client, env);
  const cls = (await loadPlugin(config.path!, keySite(site, "path"), judgePlugin)) as JudgeClass;
  return new cls(config, client, env);
}
