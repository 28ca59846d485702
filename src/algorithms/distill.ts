// Top-k distillation settings shared by opd and opsd (docs/algorithms.md, "Top-k distillation"):
// `k` teacher tokens per position, the divergence and its beta. k = 0 (the default) keeps the
// sampled-token ref_kl loss; k > 0 routes the action tokens into the trainer's distill component
// with the teacher's top-k (its rest of the mass as one tail bucket) scored at temperature 1.
import { z } from "zod";
import { EndpointError } from "../errors.ts";
import type { SamplingClient, ScoredSequence } from "../inference/types.ts";
import type { RuleViolation } from "./base.ts";

export const DIVERGENCES = ["forward_kl", "reverse_kl", "jsd"] as const;
export type Divergence = (typeof DIVERGENCES)[number];

/** The fields opd and opsd add to their schema. */
export const distillFields = {
  /** Teacher tokens per position for the distill loss; 0 = the sampled-token reverse KL (ref_kl). */
  k: z.number().int().min(0).max(4096).default(0),
  /** forward_kl (teacher || student, the default: raises every token the teacher likes), reverse_kl,
   * or jsd (generalized Jensen-Shannon with `beta`). */
  divergence: z.enum(DIVERGENCES).optional(),
  /** jsd's mixture weight of the teacher, in (0, 1); 0.5 when absent. */
  beta: z.number().gt(0).lt(1).optional(),
};

export interface DistillConfig {
  k: number;
  divergence?: Divergence;
  beta?: number;
}

/** The per-token beta the trainer reads: 0 forward KL, 1 reverse KL, jsd's beta between. */
export function distillBeta(config: DistillConfig): number {
  const divergence = config.divergence ?? "forward_kl";
  return divergence === "forward_kl" ? 0 : divergence === "reverse_kl" ? 1 : (config.beta ?? 0.5);
}

/** The rules the schema alone cannot check: divergence and beta only with k > 0, beta only with jsd. */
export function checkDistillConfig(config: DistillConfig): RuleViolation | undefined {
  if (config.k === 0 && (config.divergence !== undefined || config.beta !== undefined))
    return {
      key: config.divergence !== undefined ? "divergence" : "beta",
      message:
        "divergence and beta shape the top-k distillation loss, which k = 0 (the sampled-token loss) does not use",
      fix: "set k to the teacher tokens per position (e.g. k = 16), or remove divergence and beta",
    };
  if (config.beta !== undefined && config.divergence !== "jsd")
    return {
      key: "beta",
      message: `beta is the generalized JSD's mixture weight; divergence is ${config.divergence ?? "forward_kl (the default)"}`,
      fix: 'set divergence = "jsd", or remove beta',
    };
  return undefined;
}

/** Scores sequences with their top-k through a client, checking it can and did answer (names `who`). */
export async function scoreTopK(
  client: SamplingClient,
  sequences: number[][],
  k: number,
  who: string,
): Promise<ScoredSequence[]> {
  if (!client.scoreTop)
    throw new EndpointError(`${who} cannot score with top-k logprobs, which k = ${k} needs`, {
      fix: "serve it with rlx serve (or vLLM) over HTTP, or set k = 0",
    });
  const scored = await client.scoreTop(sequences, k);
  sequences.forEach((seq, i) => {
    if (scored[i]?.logprobs.length !== seq.length || scored[i]?.top.length !== seq.length)
      throw new EndpointError(
        `${who} returned ${scored[i]?.logprobs.length ?? 0} prompt logprobs for ${seq.length} tokens`,
        { fix: "the endpoint must return one prompt logprob and its top-k per token (vLLM prompt_logprobs = k)" },
      );
  });
  return scored;
}
