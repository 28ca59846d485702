// The orchestrator's state that outlives a step, in one place (docs/task_samplers.md, "State across
// steps"). Everything the step loop carries from one batch to the next registers here under a key:
//
//   draws              the run-level draw: the env-choice RNG, the group counter and the admitted
//                      groups drawn ahead that wait for the next step (sampler.ts, groups.ts)
//   stats/<env>        the env's per-task statistics (src/task_samplers/stats.ts)
//   sampler/<env>      the env's sampler's own state: its cursor, RNG, replay buffer
//   algorithm/<env>    the env's algorithm's own state, when it keeps one (Algorithm.saveState)
//   barriers/<env>     rollouts waiting on the algorithm's own barriers and their open sets (barriers.ts)
//
// When batch N is cut nothing is in flight (every group drawn for it has finished and was trained,
// discarded or kept pending), so `save()` then is the whole truth: it travels in step file N to the trainer,
// which writes it into checkpoints/step_N/orchestrator.json; `--resume` hands it to `load()` before
// the first draw, and a resumed run draws exactly what the killed run would have. A part whose
// saveState() returns undefined keeps nothing. Later features register their own keys; the checkpoint format does not change.
import { RlxError } from "../errors.ts";

/** Something whose state outlives a step: a JSON snapshot, and a way back from it. */
export interface Carried {
  saveState(): unknown;
  loadState(state: any): void;
}

export class CarriedState {
  private readonly parts = new Map<string, Carried>();

  /** Adds a part under a key no other part has. */
  register(key: string, part: Carried): void {
    if (this.parts.has(key)) throw new RlxError(`the orchestrator's state has two parts named "${key}"`);
    this.parts.set(key, part);
  }

  /** Every part's state, by key (JSON; a copy, so later steps do not change it). */
  save(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [key, part] of this.parts) {
      const state = part.saveState();
      if (state !== undefined) out[key] = structuredClone(state);
    }
    return out;
  }

  /**
   * Hands each part its saved state. A saved key no part claims means the checkpoint is of a run
   * with other envs (or samplers that kept something): refused, since its draws would not continue.
   * A part with nothing saved starts fresh (it kept nothing when the checkpoint was written).
   */
  load(saved: Record<string, unknown>, where: string): void {
    const unknown = Object.keys(saved).filter((key) => !this.parts.has(key));
    if (unknown.length > 0)
      throw new RlxError(
        `${where}: the checkpoint holds state for ${unknown.map((k) => `"${k}"`).join(", ")}, which this run does not have`,
        {
          fix: "resume with the config of the run that wrote the checkpoint (the same train envs and samplers)",
        },
      );
    for (const [key, part] of this.parts) if (key in saved) part.loadState(structuredClone(saved[key]));
  }
}
