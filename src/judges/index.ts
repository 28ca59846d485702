// The judge registry: a judge block's `type` -> the judge (docs/algorithms.md, "Judges"). A new
// judge is one file implementing `Judge` (judge.ts) and one line here.
import type { Env } from "../envs/types.ts";
import type { ChatClient } from "../inference/chat_client.ts";
import { AgenticJudge } from "./agentic.ts";
import type { Judge } from "./judge.ts";
import { RubricJudge } from "./rubric.ts";
import type { JudgeConfig } from "./schema.ts";

export const JUDGES: Record<JudgeConfig["type"], (config: JudgeConfig, client: ChatClient, env: Env) => Judge> = {
  rubric: (config, client) => new RubricJudge(config, client),
  agentic: (config, client, env) => new AgenticJudge(config, client, env),
};

/** The judge a config block names, over a connected chat client, for an env (its tools). */
export function createJudge(config: JudgeConfig, client: ChatClient, env: Env): Judge {
  return JUDGES[config.type](config, client, env);
}
