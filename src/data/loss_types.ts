// The rl component's loss types and reductions, in rlx.h's RLX_RL_* and RLX_REDUCE_* order (the
// index is the code the shim reads). No imports, so the config schema names them without loading
// anything native.
export const RL_LOSS_TYPES = ["dppo_kl", "ipo", "icepop", "tis", "mis", "seq_tis", "seq_mis"] as const;
export type RlLossType = (typeof RL_LOSS_TYPES)[number];

export const RL_REDUCTIONS = ["token", "sequence", "constant"] as const;
export type RlReduction = (typeof RL_REDUCTIONS)[number];
