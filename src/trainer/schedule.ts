// The learning-rate schedule (config `trainer.schedule`), computed in TypeScript and handed to the
// optimizer step by step (docs/architecture.md §6): a pure function of the step number, so a resumed run gets
// exactly the rates the uninterrupted run would have, with no scheduler state to checkpoint.
//
// Steps are 1-indexed (the first optimizer step is step 1). With W warmup steps, step s <= W runs
// at lr * s / W; after warmup:
//   constant  lr
//   linear    lr down to min_lr in a straight line, reaching min_lr at the last step
//   cosine    min_lr + (lr - min_lr) * (1 + cos(pi * progress)) / 2, reaching min_lr at the last step
// where progress = (s - W) / (max_steps - W).

export interface ScheduleSettings {
  type: "constant" | "linear" | "cosine";
  warmup_steps: number;
  min_lr: number;
}

/** The learning rate of optimizer step `step` (1-indexed) of a run of `maxSteps` steps. */
export function learningRate(step: number, lr: number, schedule: ScheduleSettings, maxSteps: number): number {
  const warmup = schedule.warmup_steps;
  if (warmup > 0 && step <= warmup) return (lr * step) / warmup;
  if (schedule.type === "constant" || maxSteps <= warmup) return lr;
  const progress = Math.min(1, Math.max(0, (step - warmup) / (maxSteps - warmup)));
  const span = lr - schedule.min_lr;
  if (schedule.type === "linear") return lr - span * progress;
  return schedule.min_lr + (span * (1 + Math.cos(Math.PI * progress))) / 2;
}
