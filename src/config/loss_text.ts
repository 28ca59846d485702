// An rl loss in one line, as `rlx train --dry-run` prints each env's: its type, its reduction and
// the settings that type reads (docs/architecture.md §6; native/src/rl_loss.cpp and rl_clip.cpp
// read them), so a run's file says what trains each env without the settings nobody reads.
import type { RlLoss, RlLossType } from "../data/loss_types.ts";

type Setting = Exclude<keyof RlLoss, "type" | "reduction" | "constant">;

const TRUST_REGION: readonly Setting[] = ["adv_tau", "kl_tau"];
const IS: readonly Setting[] = ["is_cap", ...TRUST_REGION];
const CLIP: readonly Setting[] = ["clip_low", "clip_high"];

/** The settings each type reads (the clipping types read neither adv_tau nor kl_tau). */
export const LOSS_TYPE_SETTINGS: Record<RlLossType, readonly Setting[]> = {
  dppo_kl: ["dppo_mask_low", "dppo_mask_high", ...TRUST_REGION],
  ipo: ["ipo_threshold", ...TRUST_REGION],
  icepop: ["is_low", "is_high", ...TRUST_REGION],
  tis: IS,
  mis: IS,
  seq_tis: IS,
  seq_mis: IS,
  gspo: CLIP,
  cispo: CLIP,
  clip_higher: CLIP,
  gmpo: CLIP,
};

/** The settings this loss reads, by name: its type's, and `constant` with the constant reduction. */
export function lossSettings(loss: RlLoss): Record<string, number> {
  const names: readonly string[] = [
    ...LOSS_TYPE_SETTINGS[loss.type],
    ...(loss.reduction === "constant" ? ["constant"] : []),
  ];
  return Object.fromEntries(names.map((name) => [name, loss[name as keyof RlLoss] as number]));
}

/** "gspo, reduction sequence (clip_low 0.0003, clip_high 0.0004)". */
export function lossText(loss: RlLoss): string {
  const settings = Object.entries(lossSettings(loss)).map(([name, value]) => `${name} ${value}`);
  return `${loss.type}, reduction ${loss.reduction} (${settings.join(", ")})`;
}
