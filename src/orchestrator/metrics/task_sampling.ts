// The task samplers' part of a step's metrics line (docs/run-directory.md, "Metrics"; docs/task_samplers.md):
// per env, what the admission gate and the replay buffer did while the batch was collected, the
// sampler's own numbers (buffer size and age, the curriculum's target), and the pool: how many
// tasks have statistics and how their last pass rates spread over PASS_RATE_BINS bins. Plus the
// share of the batch's groups whose rewards differed (the groups that carry a learning signal).
// An env whose algorithm declares barriers, or that settles spawned groups, adds `barrier/<env>/*`: sets scored, sets timed out,
// members dropped by a timeout, rollouts still waiting.
import type { Rollout } from "../../data/types.ts";
import { hasSpread } from "../../task_samplers/base.ts";
import { PASS_RATE_BINS } from "../../task_samplers/stats.ts";
import type { Collected } from "../collect.ts";
import type { TrainEnv } from "../setup.ts";

/** `sampling/<env>/...` keys, `sampling/signal_share` and `sampling/pending` (groups drawn ahead
 * and waiting for the next step) for step `step`'s collected batch. */
export function taskSamplerMetrics(
  step: number,
  collected: Pick<Collected, "admission" | "groups">,
  envs: readonly TrainEnv[],
  pending: number,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const env of envs) {
    const name = env.resolved.name;
    const key = (k: string) => `sampling/${name}/${k}`;
    const count = collected.admission.get(name);
    if (count) {
      out[key("admitted")] = count.admitted;
      out[key("rejected")] = count.rejected;
      out[key("over_bound")] = count.overBound;
      out[key("replayed")] = count.replayed;
    }
    for (const [k, v] of Object.entries(env.sampler.metrics(step))) out[key(k)] = v;
    out[key("pool_tasks")] = env.stats.size;
    env.stats.histogram().forEach((n, bin) => (out[key(`pool_pass_rate_${(bin / PASS_RATE_BINS).toFixed(1)}`)] = n));
    if (env.barriers.active) {
      const c = env.barriers.takeCounts();
      Object.assign(out, {
        [`barrier/${name}/scored`]: c.scored,
        [`barrier/${name}/timed_out`]: c.timedOut,
        [`barrier/${name}/dropped`]: c.dropped,
        [`barrier/${name}/waiting`]: env.barriers.held,
      });
    }
  }
  const groups = collected.groups.filter((g: Rollout[]) => g.length > 0);
  out["sampling/signal_share"] = groups.length ? groups.filter(hasSpread).length / groups.length : 0;
  out["sampling/pending"] = pending;
  return out;
}
