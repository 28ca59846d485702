// The `judge = {...}` block of a train env (docs/algorithms.md, "Judges"): a frozen chat endpoint,
// configured like an opd teacher (`name`, `base_url`, `api_key_var`), whose score replaces the env's
// exact reward. `type` picks the judge: "rubric" (one call, a SCORE line), "agentic" (a tool loop
// ending with a verdict call) or "custom" (a user's file, `path`, with its own `args`). The judge may have any tokenizer: it reads text over
// /v1/chat/completions. Its calls are limited by the env's `reward = { concurrency, timeout_s }`.
import { z } from "zod";

const positiveInt = z.number().int().positive();

/** The endpoint fields every judge has (the same keys as a frozen teacher's). */
export const judgeEndpointFields = {
  /** Model name sent in requests (the server's /v1/models id). */
  name: z.string().min(1),
  /** Base URL including /v1, e.g. "http://127.0.0.1:8002/v1". */
  base_url: z.url({ protocol: /^https?$/ }),
  /** Environment variable holding the API key, if the endpoint needs one. */
  api_key_var: z.string().optional(),
  /** Tokens per judge reply. */
  max_tokens: positiveInt.default(512),
  /** 0 = greedy (reproducible verdicts; each call also carries a seed from the rollout id). */
  temperature: z.number().min(0).max(2).default(0),
};

export const judgeSchema = z
  .strictObject({
    type: z.enum(["rubric", "agentic", "custom"]),
    ...judgeEndpointFields,
    /** Agentic judges: model turns before a judge without a verdict fails the rollout. */
    max_turns: positiveInt.default(8),
    /** type = "custom": the judge's .ts file (relative to the directory rlx runs in). */
    path: z.string().min(1).optional(),
    /** type = "custom": the judge's own settings, as `this.config.args`. */
    args: z.record(z.string(), z.unknown()).default({}),
  })
  .refine((j) => (j.type === "custom") === (j.path !== undefined), {
    message: 'path is required with type = "custom" (a judge\'s .ts file) and only then',
    path: ["path"],
  });
export type JudgeConfig = z.infer<typeof judgeSchema>;
export type JudgeEndpoint = Pick<JudgeConfig, "name" | "base_url" | "api_key_var" | "max_tokens" | "temperature">;
