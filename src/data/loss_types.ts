// The rl component's loss types and reductions, in rlx.h's RLX_RL_* and RLX_REDUCE_* order (the
// index is the code the shim reads), and one rl loss as a step carries it: every setting filled in,
// so a step file's loss table says exactly what trained each sample. No imports, so the config
// schema names them without loading anything native.
export const RL_LOSS_TYPES = [
  "dppo_kl",
  "ipo",
  "icepop",
  "tis",
  "mis",
  "seq_tis",
  "seq_mis",
  "gspo",
  "cispo",
  "clip_higher",
  "gmpo",
] as const;
export type RlLossType = (typeof RL_LOSS_TYPES)[number];

export const RL_REDUCTIONS = ["token", "sequence", "constant"] as const;
export type RlReduction = (typeof RL_REDUCTIONS)[number];

/** One rl loss with every setting (config `[trainer.loss]`, or `loss` in an env's algo block). */
export interface RlLoss {
  type: RlLossType;
  reduction: RlReduction;
  /** The constant reduction's divisor per sample (the config's default: orchestrator.max_tokens). */
  constant: number;
  dppo_mask_low: number;
  dppo_mask_high: number;
  adv_tau: number;
  kl_tau: number;
  ipo_threshold: number;
  is_low: number;
  is_high: number;
  is_cap: number;
  /** The clip range of gspo, cispo, clip_higher (ratio in [1 - clip_low, 1 + clip_high]) and gmpo
   * (log ratio in [-clip_low, clip_high]). */
  clip_low: number;
  clip_high: number;
}

/** Each clipping type's papers' range [clip_low, clip_high]: GSPO (arXiv 2507.18071) 3e-4 / 4e-4;
 * CISPO (MiniMax-M1, arXiv 2506.13585) no lower bound (1: the weight may fall to 0) and 0.28, the
 * paper tunes only the upper one and states no value (Trinity-RFT's default); DAPO's clip-higher
 * (arXiv 2503.14476) 0.2 / 0.28; GMPO (arXiv 2507.20673) 0.4 / 0.4 in log space. The other types
 * do not read them. */
export const CLIP_DEFAULTS: Record<RlLossType, readonly [low: number, high: number]> = {
  dppo_kl: [0.2, 0.28],
  ipo: [0.2, 0.28],
  icepop: [0.2, 0.28],
  tis: [0.2, 0.28],
  mis: [0.2, 0.28],
  seq_tis: [0.2, 0.28],
  seq_mis: [0.2, 0.28],
  gspo: [3e-4, 4e-4],
  cispo: [1, 0.28],
  clip_higher: [0.2, 0.28],
  gmpo: [0.4, 0.4],
};

/** The reduction a type's paper uses when the config names none: the sequence-level types average
 * each sample's tokens first (GSPO's and GMPO's per-sequence objective), the rest the token mean. */
export function defaultReduction(type: RlLossType): RlReduction {
  return type === "gspo" || type === "gmpo" ? "sequence" : "token";
}

/** The settings a type-agnostic default fills in (the config schema's defaults). */
export const RL_LOSS_DEFAULTS = {
  dppo_mask_low: 0.2,
  dppo_mask_high: 0.2,
  adv_tau: 1.0,
  kl_tau: 1e-3,
  ipo_threshold: 0.1,
  is_low: 0.5,
  is_high: 5.0,
  is_cap: 2.0,
} as const;

/** The settings that default by type, filled in where absent: its paper's reduction and clip range. */
export function withTypeDefaults<
  T extends { type: RlLossType; reduction?: RlReduction; clip_low?: number; clip_high?: number },
>(l: T): T & { reduction: RlReduction; clip_low: number; clip_high: number } {
  const [clip_low, clip_high] = CLIP_DEFAULTS[l.type];
  return {
    ...l,
    reduction: l.reduction ?? defaultReduction(l.type),
    clip_low: l.clip_low ?? clip_low,
    clip_high: l.clip_high ?? clip_high,
  };
}

/** A whole RlLoss from the settings given: type dppo_kl, its reduction and clip range by type,
 * the rest from RL_LOSS_DEFAULTS, constant 1. */
export function rlLoss(given: Partial<RlLoss> = {}): RlLoss {
  const set = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined));
  return withTypeDefaults({ ...RL_LOSS_DEFAULTS, constant: 1, ...set, type: given.type ?? "dppo_kl" });
}
