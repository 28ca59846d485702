// The learning-rate schedule (config `trainer.schedule`), computed in TypeScript and handed to the
// optimizer step by step (docs/architecture.md §6): a pure function of the step number, so a resumed run gets
// exactly the rates the uninterrupted run would have, with no scheduler state to checkpoint.
//
// Steps are 1-indexed (the first optimizer step is step 1). With W warmup steps, step s <= W runs
// at lr * s / W; after warmup:
//   constant  lr
//   linear    lr down to min_lr in a straight line, reaching min_lr at the last step
//   cosine    min_lr + (lr - min_lr) * (1 + cos(pi * progress)) / 2, reaching min_lr at the last step
// where progress = (s - W) / (D - W), D = decay_steps when set (the rate then stays at min_lr
// after step D: a run that stops on a score band, src/sft/band.ts, can go on past the decay) and
// max_steps otherwise.

export interface ScheduleSettings {
  type: "constant" | "linear" | "cosine";
  warmup_steps: number;
  min_lr: number;
  decay_steps?: number;
}

/** The learning rate of optimizer step `step` (1-indexed) of a run of `maxSteps` steps (the decay's length unless `decay_steps` is set). */
export function learningRate(step: number, lr: number, schedule: ScheduleSettings, maxSteps: number): number {
  const warmup = schedule.warmup_steps;
  if (warmup > 0 && step <= warmup) return (lr * step) / warmup;
  const decaySteps = schedule.decay_steps ?? maxSteps;
  if (schedule.type === "constant" || decaySteps <= warmup) return lr;
  const progress = Math.min(1, Math.max(0, (step - warmup) / (decaySteps - warmup)));
  const span = lr - schedule.min_lr;
  if (schedule.type === "linear") return lr - span * progress;
  return schedule.min_lr + (span * (1 + Math.cos(Math.PI * progress))) / 2;
}
