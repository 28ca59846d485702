// Running an algorithm hook with the orchestrator's failure rule (groups.ts, barriers.ts): a hook
// that throws fails the rollouts it was scoring, as data, never the run.
import type { Rollout } from "../data/types.ts";
import { ConfigError } from "../errors.ts";

/**
 * Runs an algorithm hook; if it throws, the rollouts it was scoring fail (as data, not a crash):
 * an endpoint that is down, a tool that broke. A ConfigError is not data: the run's config is
 * wrong (OPSD's demonstration key names no field, an ECHO filter returns masks of the wrong
 * shape), every later rollout would fail the same way and only bias the batch until the failure
 * limit trips, so it stops the run at once, with that error and its fix.
 */
export async function failAsData(rollouts: Rollout[], hook: string, run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    // a judge that failed one rollout (agentic credit's): its conversation goes with the rollout
    const judge = (err as { judge?: Rollout["judge"] } | undefined)?.judge;
    if (judge && rollouts.length === 1 && !rollouts[0]!.error) rollouts[0]!.judge = judge;
    for (const rollout of rollouts) {
      if (rollout.error) continue;
      rollout.error = `${hook} failed: ${(err as Error).message}`;
      rollout.metrics = { ...rollout.metrics, error: 1 };
    }
  }
}
