// The shared group math of the group-relative algorithms: one array of rewards in, one array of
// scalar advantages out, index i belonging to rollout i of the group. Kept free of rollouts so the
// formulas can be read (and tested) on their own; routing.ts spreads the scalars over tokens.
//
// Conventions (prime-rl's orchestrator/algo/grpo.py and max_rl.py; DeepSeekMath arXiv 2402.03300,
// Dr. GRPO arXiv 2503.20783, MaxRL arXiv 2602.02710, RLOO arXiv 2402.14740, REINFORCE++ arXiv
// 2501.03262, DAPO arXiv 2503.14476):
//   - centering:  A_i = r_i - mean(r)                                   (Dr. GRPO; prime-rl's grpo)
//   - std option: A_i / (std(r) + 1e-6), std with Bessel's N-1 correction as verl and the MaxRL
//     code compute it (DeepSeekMath's GRPO); a singleton group has A = 0 either way.
//   - max_rl:     A_i = (r_i - mean) / mean, and all zero when mean <= 0.
//   - rloo:       A_i = r_i - mean_{j != i} r_j = G/(G-1) (r_i - mean(r)); a singleton gets 0.
//   - whitened:   (x_i - m) / sqrt(v + 1e-8) with m, v the token-weighted mean and Bessel variance
//     of a whole batch (REINFORCE++'s global normalization, as verl's masked_whiten computes it).
//   - the linear length penalty shapes rewards before centering, scaled by the group's pass rate;
//     DAPO's soft overlong punishment shapes them by each rollout's own output length.
import type { Rollout } from "../data/types.ts";

/** The mean; exactly the common value when all are equal, so a uniform group's advantages are
 * exactly 0 (0.7 * 3 / 3 is not 0.7 in floating point) and the zero-advantage filter sees them. */
export function mean(values: readonly number[]): number {
  if (!values.length) return 0;
  if (values.every((v) => v === values[0])) return values[0]!;
  let sum = 0;
  for (const v of values) sum += v;
  return sum / values.length;
}

/** Sample standard deviation (N-1); 0 for fewer than two values. */
export function std(values: readonly number[]): number {
  if (values.length < 2) return 0;
  const m = mean(values);
  let sq = 0;
  for (const v of values) sq += (v - m) ** 2;
  return Math.sqrt(sq / (values.length - 1));
}

export const STD_EPS = 1e-6;

/** r_i - mean(r). */
export function centered(rewards_G: readonly number[]): number[] {
  const m = mean(rewards_G);
  return rewards_G.map((r) => r - m);
}

/** (r_i - mean(r)) / (std(r) + eps): DeepSeekMath's GRPO advantage. */
export function stdNormalized(rewards_G: readonly number[]): number[] {
  const s = std(rewards_G);
  return centered(rewards_G).map((a) => a / (s + STD_EPS));
}

/** MaxRL: (r_i - mean) / mean, all zero when mean <= 0 (no success in the group). */
export function maxRl(rewards_G: readonly number[]): number[] {
  const m = mean(rewards_G);
  if (m <= 0) return rewards_G.map(() => 0);
  return rewards_G.map((r) => (r - m) / m);
}

/** RLOO: r_i minus the mean of the OTHER rewards, G/(G-1) (r_i - mean r); 0 for a singleton. */
export function rloo(rewards_G: readonly number[]): number[] {
  const g = rewards_G.length;
  if (g < 2) return rewards_G.map(() => 0);
  return centered(rewards_G).map((a) => (a * g) / (g - 1));
}

export const WHITEN_EPS = 1e-8;

/**
 * Batch whitening with per-item weights (each rollout's action-token count): the mean and the
 * Bessel-corrected variance over the batch's tokens, as verl's masked_whiten computes them over
 * the response mask (each token of rollout i holds x_i):
 *   m = sum w_i x_i / W,   v = sum w_i (x_i - m)^2 / (W - 1),   out_i = (x_i - m) / sqrt(v + 1e-8)
 * Equal values give exactly 0; fewer than two tokens have no variance (v = 0).
 */
export function whitened(values_B: readonly number[], weights_B: readonly number[]): number[] {
  if (!values_B.length) return [];
  let total = 0;
  let sum = 0;
  values_B.forEach((x, i) => {
    total += weights_B[i]!;
    sum += weights_B[i]! * x;
  });
  const m = values_B.every((x) => x === values_B[0]) ? values_B[0]! : sum / total;
  let sq = 0;
  values_B.forEach((x, i) => (sq += weights_B[i]! * (x - m) ** 2));
  const v = total > 1 ? sq / (total - 1) : 0;
  return values_B.map((x) => (x - m) / Math.sqrt(v + WHITEN_EPS));
}

/** DAPO's overlong window: L_max, the buffer L_cache before it, and the penalty at and past L_max. */
export interface OverlongWindow {
  maxTokens: number;
  buffer: number;
  penaltyFactor: number;
}

/**
 * DAPO's soft overlong punishment of one rollout with `length` sampled tokens (arXiv 2503.14476,
 * eq. 13), scaled by the penalty factor as verl's DAPO reward manager scales it:
 *   0                                   length <= L_max - L_cache
 *   ((L_max - L_cache) - length) / L_cache   L_max - L_cache < length <= L_max   (0 down to -1)
 *   -1                                  length > L_max
 * times penalty_factor.
 */
export function overlongPenalty(length: number, w: OverlongWindow): number {
  const exceed = length - (w.maxTokens - w.buffer);
  if (exceed <= 0) return 0;
  return -Math.min(exceed / w.buffer, 1) * w.penaltyFactor;
}

/** Rewards plus their rollouts' overlong penalties (output token counts). */
export function overlongShaped(
  rewards_G: readonly number[],
  outputs_G: readonly number[],
  w: OverlongWindow,
): number[] {
  return rewards_G.map((r, i) => r + overlongPenalty(outputs_G[i]!, w));
}

export interface LengthPenaltyWeights {
  num_output_tokens_weight: number;
  num_input_tokens_weight: number;
  num_turns_weight: number;
}

/** Per rollout: sampled tokens, all other tokens, model turns. */
export interface RolloutSize {
  output: number;
  input: number;
  turns: number;
}

export function rolloutSize(rollout: Rollout): RolloutSize {
  let output = 0;
  let total = 0;
  for (const s of rollout.segments) {
    total += s.tokenIds.length;
    if (s.sampled) output += s.tokenIds.length;
  }
  return { output, input: total - output, turns: rollout.numTurns };
}

/**
 * The linear length penalty: each rollout's size as a fraction of the group's largest, weighted,
 * times the group's mean reward, is subtracted from its reward:
 *   frac_i   = w_out out_i/max(out) + w_in in_i/max(in) + w_turns turns_i/max(turns)
 *   shaped_i = r_i - mean(r) frac_i
 * Equal sizes shift every reward by the same amount, so centering gives plain GRPO back; a group
 * with mean reward 0 is not penalized.
 */
export function lengthShaped(
  rewards_G: readonly number[],
  sizes_G: readonly RolloutSize[],
  w: LengthPenaltyWeights,
): number[] {
  const m = mean(rewards_G);
  const most = (pick: (s: RolloutSize) => number) => Math.max(1, ...sizes_G.map(pick));
  const maxOut = most((s) => s.output);
  const maxIn = most((s) => s.input);
  const maxTurns = most((s) => s.turns);
  return rewards_G.map((r, i) => {
    const s = sizes_G[i]!;
    const frac =
      (w.num_output_tokens_weight * s.output) / maxOut +
      (w.num_input_tokens_weight * s.input) / maxIn +
      (w.num_turns_weight * s.turns) / maxTurns;
    return r - m * frac;
  });
}
