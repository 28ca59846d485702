// DAPO's soft overlong punishment (Yu et al., arXiv 2503.14476, §3.4) as an option of an algorithm's
// config block: `overlong = { buffer = L_cache }`, optionally `max_tokens = L_max` and
// `penalty_factor`. Each rollout's reward is shaped by its own output length before the algorithm
// computes credit (the math: overlongPenalty in group.ts):
//
//   r_i += 0                                   |y_i| <= L_max - L_cache
//   r_i += ((L_max - L_cache) - |y_i|) / L_cache   L_max - L_cache < |y_i| <= L_max
//   r_i += -1                                  |y_i| > L_max            (all times penalty_factor)
//
// |y_i| is the rollout's sampled tokens over all its turns (rolloutSize(r).output). L_max defaults
// to the env's max_tokens (the cap on a model turn, so on a single-turn rollout: DAPO's and verl's
// max response length), which an algorithm learns at setup (AlgorithmContext.maxTokens); set it
// for a multi-turn env, whose rollouts may sample several turns' worth. Names follow verl's DAPO
// recipe (`overlong_buffer.len`, `penalty_factor` 1.0): verl never sees a response past L_max (its
// generator cuts there), where the paper's -1 applies. Only the credit sees the shaped reward: the
// rollout's `reward` (metrics, task samplers, the filter's gate) stays the env's.
import { z } from "zod";
import type { Rollout } from "../data/types.ts";
import { ConfigError } from "../errors.ts";
import type { AlgorithmContext } from "./base.ts";
import { type OverlongWindow, overlongShaped, rolloutSize } from "./group.ts";

export const overlongSchema = z
  .strictObject({
    /** L_max; absent: the env's max_tokens. */
    max_tokens: z.number().int().positive().optional(),
    /** L_cache: the window before L_max over which the penalty ramps from 0 to -penalty_factor. */
    buffer: z.number().int().positive(),
    /** The penalty at and past L_max (verl's default 1.0: the paper's -1). */
    penalty_factor: z.number().min(0).default(1),
  })
  .refine((o) => o.max_tokens === undefined || o.buffer < o.max_tokens, {
    path: ["buffer"],
    message: "must be less than max_tokens (the window L_max - buffer .. L_max must start above 0)",
  });
export type OverlongConfig = z.infer<typeof overlongSchema>;

/** The window of an `overlong` block, L_max defaulting to the env's max_tokens (checked here: the
 * buffer must leave room below it). */
export function overlongWindow(config: OverlongConfig, envMaxTokens: number, env: string): OverlongWindow {
  const maxTokens = config.max_tokens ?? envMaxTokens;
  if (config.buffer >= maxTokens)
    throw new ConfigError(
      `env "${env}": algo.overlong.buffer ${config.buffer} is not less than the env's max_tokens ${maxTokens} (L_max)`,
      { fix: "lower overlong.buffer, or set overlong.max_tokens" },
    );
  return { maxTokens, buffer: config.buffer, penaltyFactor: config.penalty_factor };
}

/** An algorithm's `overlong` option: its window, known at setup, and the rewards it shapes. */
export class OverlongShaping {
  private window?: OverlongWindow;
  constructor(private readonly config: OverlongConfig | undefined) {}

  setup(ctx: Pick<AlgorithmContext, "maxTokens" | "env">): void {
    if (this.config) this.window = overlongWindow(this.config, ctx.maxTokens, ctx.env);
  }

  /** The rollouts' rewards, shaped when the block has an `overlong` option. */
  rewards(rollouts: readonly Rollout[]): number[] {
    const rewards = rollouts.map((r) => r.reward);
    if (!this.config) return rewards;
    if (!this.window) throw new Error("overlong shaping used before the algorithm's setup");
    return overlongShaped(
      rewards,
      rollouts.map((r) => rolloutSize(r).output),
      this.window,
    );
  }
}
