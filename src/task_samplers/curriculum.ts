// `curriculum`: tasks drawn by a weight from their statistics (stats.ts), preferring what the
// policy is learning now. With p = the pass rate of the task's last group:
//
//   never drawn                         new_weight
//   p >= retire_at (solved)             solved_weight      (0: retired for good)
//   p <= 0 (unsolved)                   unsolved_weight until retry_after steps since it was last
//                                       seen, then new_weight again (hard tasks are retried later)
//   otherwise                           max(min_weight, 1 - |p - target| / max(target, 1 - target))
//
// `target` follows a schedule over steps: from `target` at step 1 linearly to `target_end` at
// `schedule_steps` (then flat), e.g. easy tasks first (0.8 -> 0.3). A weighted draw needs one pass
// over the env's tasks; when every weight is 0 (everything retired) the draw falls back to the
// uniform walk. The RNG is part of the state, so a resumed run draws what the killed one would have.
import { type ZodType, z } from "zod";
import type { Task } from "../data/types.ts";
import { type Pick, passRewardField } from "./base.ts";
import { Uniform } from "./uniform.ts";
import { hashString } from "../envs/random.ts";
import { nextRandom } from "./walk.ts";

const weight = z.number().min(0);
const schema = z.strictObject({
  type: z.literal("curriculum"),
  ...passRewardField,
  /** The pass rate preferred at step 1 (0.5: the most signal per group). */
  target: z.number().min(0).max(1).default(0.5),
  /** The preferred pass rate at schedule_steps; absent = target throughout. */
  target_end: z.number().min(0).max(1).optional(),
  /** Steps over which target moves to target_end. */
  schedule_steps: z.number().int().positive().default(100),
  /** A task whose last group passed at this rate or more is solved. */
  retire_at: z.number().min(0).max(1).default(1),
  solved_weight: weight.default(0),
  unsolved_weight: weight.default(0),
  new_weight: weight.default(1),
  /** The floor of a task in between, however far from target. */
  min_weight: weight.default(0.05),
  /** Steps after which an unsolved task is drawn at new_weight again. */
  retry_after: z.number().int().min(0).default(20),
});
export type CurriculumConfig = z.infer<typeof schema>;

export class Curriculum extends Uniform<CurriculumConfig> {
  static override type = "curriculum";
  static override schema: ZodType = schema;

  private rng = hashString(`curriculum:${this.ctx.seed}:${this.ctx.env}`);

  /** The preferred pass rate at `step`. */
  target(step: number): number {
    const { target, target_end, schedule_steps } = this.config;
    if (target_end === undefined) return target;
    const t = Math.min(1, Math.max(0, (step - 1) / Math.max(1, schedule_steps - 1)));
    return target + (target_end - target) * t;
  }

  /** A task's weight in the draw at `step`. */
  weight(task: Task, step: number): number {
    const c = this.config;
    const stat = this.ctx.stats.get(task.id);
    if (!stat) return c.new_weight;
    const p = stat.lastPassRate;
    if (p >= c.retire_at) return c.solved_weight;
    if (p <= 0) return step - stat.lastSeenStep >= c.retry_after ? c.new_weight : c.unsolved_weight;
    const target = this.target(step);
    return Math.max(c.min_weight, 1 - Math.abs(p - target) / Math.max(target, 1 - target));
  }

  override next(step: number): Pick {
    const taskWeights = this.ctx.tasks.map((task) => this.weight(task, step));
    const total = taskWeights.reduce((a, b) => a + b, 0);
    if (total <= 0) return super.next(step);
    const r = nextRandom(this.rng);
    this.rng = r.state;
    let left = r.value * total;
    for (let i = 0; i < taskWeights.length; i++) {
      left -= taskWeights[i]!;
      if (left < 0 && taskWeights[i]! > 0) return { task: this.ctx.tasks[i]! };
    }
    return { task: this.ctx.tasks[taskWeights.findLastIndex((w) => w > 0)]! };
  }

  override metrics(step: number): Record<string, number> {
    return { target: this.target(step) };
  }

  override saveState(): unknown {
    return { cursor: this.cursor, rng: this.rng };
  }

  override loadState(state: unknown): void {
    const s = state as { cursor: number; rng?: number };
    this.cursor = s.cursor;
    this.rng = s.rng ?? this.rng; // a uniform sampler's state (a format-1 checkpoint) has no RNG
  }
}
