// Per-task statistics of one train env, kept by the orchestrator for every sampler (the curriculum
// weighs tasks by them, the audit record and the pool metrics show them): per task, the rollouts
// that finished (attempts), how many passed (reward >= the sampler's `pass_reward`), the pass rate
// of the task's last group, and the step it was last drawn at. Failed rollouts are not attempts.
// Only tasks that were drawn have an entry, so a big dataset costs nothing until it is used. The
// whole table is JSON (task id -> [attempts, passes, last pass rate, last seen step]), saved in
// the orchestrator's checkpoint so a resumed curriculum weighs tasks as the killed run would have.
import type { Rollout } from "../data/types.ts";

/** What the orchestrator knows about one task. */
export interface TaskStat {
  /** Rollouts of the task that finished without an error. */
  attempts: number;
  /** Of those, rollouts whose reward reached `pass_reward`. */
  passes: number;
  /** Pass rate of the task's most recent group (what the policy does now). */
  lastPassRate: number;
  /** The step the task's most recent group was drawn for. */
  lastSeenStep: number;
}

/** The table's checkpoint form: task id -> [attempts, passes, last pass rate, last seen step]. */
export type TaskStatsState = Record<string, [number, number, number, number]>;

/** Bins of the pool's pass-rate histogram: [0, 0.2), [0.2, 0.4), ..., [0.8, 1]. */
export const PASS_RATE_BINS = 5;

export class TaskStats {
  private readonly table = new Map<string, TaskStat>();

  constructor(private readonly passReward: number) {}

  /** The statistics of a task, or undefined before its first finished group. */
  get(taskId: string): TaskStat | undefined {
    return this.table.get(taskId);
  }

  /** Tasks with statistics. */
  get size(): number {
    return this.table.size;
  }

  /** Whether a rollout passed (reward >= pass_reward). */
  passed(rollout: Rollout): boolean {
    return rollout.reward >= this.passReward;
  }

  /** Counts a finished group of one task drawn at `step`; a group whose rollouts all failed counts nothing. */
  record(group: readonly Rollout[], step: number): void {
    const ok = group.filter((r) => !r.error);
    if (ok.length === 0) return;
    const id = ok[0]!.taskId;
    const passes = ok.filter((r) => this.passed(r)).length;
    const stat = this.table.get(id) ?? { attempts: 0, passes: 0, lastPassRate: 0, lastSeenStep: step };
    stat.attempts += ok.length;
    stat.passes += passes;
    stat.lastPassRate = passes / ok.length;
    stat.lastSeenStep = step;
    this.table.set(id, stat);
  }

  /** Task counts per pass-rate bin of the last group (PASS_RATE_BINS bins over [0, 1]). */
  histogram(): number[] {
    const histogram = new Array<number>(PASS_RATE_BINS).fill(0);
    for (const stat of this.table.values())
      histogram[Math.min(PASS_RATE_BINS - 1, Math.floor(stat.lastPassRate * PASS_RATE_BINS))]!++;
    return histogram;
  }

  saveState(): TaskStatsState {
    const out: TaskStatsState = {};
    for (const [id, s] of this.table) out[id] = [s.attempts, s.passes, s.lastPassRate, s.lastSeenStep];
    return out;
  }

  loadState(state: TaskStatsState): void {
    this.table.clear();
    for (const [id, [attempts, passes, lastPassRate, lastSeenStep]] of Object.entries(state))
      this.table.set(id, { attempts, passes, lastPassRate, lastSeenStep });
  }
}
