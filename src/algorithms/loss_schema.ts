// The rl component's loss block: one schema for `[trainer.loss]` (the run's) and `loss` in an algo
// block (an env's, which replaces the run's for that env's samples; docs/architecture.md §6). It lives
// beside the sampling block's schema because the registry strips and parses `loss` from every algo
// block; the parsed block leaves `constant` unset when absent, and resolveLoss fills it with
// orchestrator.max_tokens, spelling out every setting (src/data/loss_types.ts's RlLoss).
import { z } from "zod";
import { ConfigError, configError } from "../errors.ts";
import {
  RL_LOSS_DEFAULTS as D,
  RL_LOSS_TYPES,
  RL_REDUCTIONS,
  type RlLoss,
  withTypeDefaults,
} from "../data/loss_types.ts";

export const lossSchema = z
  .strictObject({
    type: z.enum(RL_LOSS_TYPES).default("dppo_kl"),
    /** token: sum / rl tokens of the step; sequence: mean per sample, then over samples;
     * constant: each sample's sum / `constant`, then over samples (Dr. GRPO). Absent: the type's
     * paper's (sequence for gspo and gmpo, token for the others). */
    reduction: z.enum(RL_REDUCTIONS).optional(),
    /** The constant reduction's divisor; absent = orchestrator.max_tokens. */
    constant: z.number().positive().optional(),
    dppo_mask_low: z.number().min(0).default(D.dppo_mask_low),
    dppo_mask_high: z.number().min(0).default(D.dppo_mask_high),
    adv_tau: z.number().min(0).default(D.adv_tau),
    kl_tau: z.number().min(0).default(D.kl_tau),
    /** ipo: masked where |exp(lp) - exp(ilp)| exceeds it. */
    ipo_threshold: z.number().min(0).default(D.ipo_threshold),
    /** icepop: token ratios outside [is_low, is_high] are masked. */
    is_low: z.number().positive().default(D.is_low),
    is_high: z.number().positive().default(D.is_high),
    /** tis / seq_tis clip, mis / seq_mis mask the (token / sequence) ratio above it. */
    is_cap: z.number().positive().default(D.is_cap),
    /** gspo, cispo, clip_higher: the ratio's range [1 - clip_low, 1 + clip_high]; gmpo: the log
     * ratio's [-clip_low, clip_high]. Absent: the type's paper's (CLIP_DEFAULTS). */
    clip_low: z.number().min(0).optional(),
    clip_high: z.number().min(0).optional(),
  })
  .refine((l) => l.is_low <= l.is_high, { message: "is_low must be <= is_high", path: ["is_low"] })
  .transform(withTypeDefaults);

/** A parsed loss block: every setting but `constant` filled in. */
export type LossConfig = z.output<typeof lossSchema>;

/** An algo block's `loss`, parsed; errors name its key path (`path`) in `source`. */
export function parseLossBlock(block: unknown, source: string, path: (string | number)[]): LossConfig {
  const parsed = lossSchema.safeParse(block);
  if (!parsed.success) throw configError(parsed.error.issues, source, path, { schema: lossSchema });
  return parsed.data;
}

/** An algorithm names `loss` only if its action tokens go to the rl component (`at`: the key's
 * place in the file, for the error). */
export function checkLossBlock(algorithm: string, actionLoss: string, at: string): void {
  if (actionLoss === "rl") return;
  throw new ConfigError(
    `${at}: ${algorithm} trains its action tokens with the ${actionLoss} loss, not the rl one, so it has no rl loss to choose`,
    { fix: "remove loss from this algo block (it is for algorithms whose action tokens go to rl: grpo, max_rl, ...)" },
  );
}

/** The RlLoss a parsed block trains with: `constant` absent = the run's max_tokens. */
export function resolveLoss(block: LossConfig, maxTokens: number): RlLoss {
  const { constant, ...rest } = block;
  return { ...rest, constant: constant ?? maxTokens };
}

/** The run's loss, `[trainer.loss]` resolved: what an rl env without its own `loss` trains with,
 * and what the trainer uses for a step file written before per-env losses. */
export function runLoss(config: { trainer: { loss: LossConfig }; orchestrator: { max_tokens: number } }): RlLoss {
  return resolveLoss(config.trainer.loss, config.orchestrator.max_tokens);
}
