// What a row keeps of a run directory (docs/run-directory.md) beside its scores: per-step curves of
// the trainer's metrics from metrics.jsonl (one line per step; the eval-only line of step 0 holds
// none of them), and the rl loss the trainer ran with, filled in from config.resolved.toml as
// src/trainer/process.ts fills it (rlLoss, constant defaulting to orchestrator.max_tokens).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "smol-toml";
import { type RlLoss, rlLoss } from "../../src/data/loss_types.ts";

/** The keys a row's curves keep: the mean token entropy, and the rl members beyond a clipping
 * type's range and dropped from the policy term (docs/run-directory.md, "Metrics"). */
export const CURVE_KEYS = ["entropy", "clipped/low", "clipped/high", "masked/low", "masked/high"] as const;

/** `step`: the steps 1..N that have a line with any of the keys; each key: its value at each of them (null where absent). */
export type Curves = Record<string, Array<number | null>>;

export function runCurves(dir: string, keys: readonly string[] = CURVE_KEYS): Curves {
  const byStep = new Map<number, Record<string, unknown>>();
  for (const line of readFileSync(join(dir, "metrics.jsonl"), "utf8").split("\n")) {
    if (!line.trim()) continue;
    const m = JSON.parse(line) as Record<string, unknown>;
    if (typeof m.step !== "number" || !keys.some((k) => typeof m[k] === "number")) continue;
    byStep.set(m.step, { ...byStep.get(m.step), ...m });
  }
  const steps = [...byStep.keys()].sort((a, b) => a - b);
  const curves: Curves = { step: steps };
  for (const key of keys) curves[key] = steps.map((s) => (byStep.get(s)![key] as number | undefined) ?? null);
  return curves;
}

export function runLoss(dir: string): RlLoss {
  const config = parse(readFileSync(join(dir, "config.resolved.toml"), "utf8")) as {
    trainer: { loss: Partial<RlLoss> };
    orchestrator: { max_tokens: number };
  };
  const loss = config.trainer.loss;
  return rlLoss({ ...loss, constant: loss.constant ?? config.orchestrator.max_tokens });
}
