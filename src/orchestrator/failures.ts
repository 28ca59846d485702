// The failure-rate limit of a run (orchestrator.max_failure_rate): failed rollouts are data, counted
// and excluded from training, but a run where most of them fail (an endpoint down, a context limit,
// an env bug) stops with the errors that say why instead of training on what is left.
import type { Rollout } from "../data/types.ts";
import { RlxError } from "../errors.ts";

/** Batches in the failure-rate window. */
const FAILURE_WINDOW = 5;

/** The failed share of the rollouts of the last FAILURE_WINDOW batches; past the limit the run stops. */
export class FailureWindow {
  private readonly batches: Array<{ failed: number; total: number; first: Map<string, string> }> = [];

  constructor(private readonly maxRate: number) {}

  check(step: number, rollouts: Rollout[]): void {
    const first = new Map<string, string>();
    for (const r of rollouts) if (r.error && !first.has(r.env)) first.set(r.env, r.error);
    this.batches.push({ failed: rollouts.filter((r) => r.error).length, total: rollouts.length, first });
    if (this.batches.length > FAILURE_WINDOW) this.batches.shift();
    const failed = this.batches.reduce((n, b) => n + b.failed, 0);
    const total = this.batches.reduce((n, b) => n + b.total, 0);
    if (total === 0 || failed / total <= this.maxRate) return;
    const errors = new Map(this.batches.flatMap((b) => [...b.first]));
    throw new RlxError(
      `step ${step}: ${failed} of the last ${total} rollouts failed (${((100 * failed) / total).toFixed(0)}%, more than orchestrator.max_failure_rate = ${this.maxRate}); ${[...errors].map(([env, error]) => `${env}: ${error}`).join("; ")}`,
      {
        fix: "fix what the errors name (an endpoint down, a context limit, an env bug), or raise orchestrator.max_failure_rate to train through it",
      },
    );
  }
}
