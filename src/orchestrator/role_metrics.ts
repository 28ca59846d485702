// Per env and role metrics of a multi-agent env's traces (docs/run-directory.md, "Metrics"):
// `role/<env>/<role>/traces` (traces in the step's batch), `errors`, and over the scored ones
// `reward`, `completion_tokens`, `trains` (the share that trains: 0 for a frozen role) and the
// mean of every metric the env's episode reported (a proposer's `pass_rate`, a game's `win`).
import type { Rollout } from "../data/types.ts";
import { mean } from "../algorithms/group.ts";
import { metricMeans } from "./metrics.ts";

/** The `role/<env>/<role>/*` keys of the rollouts that carry a role (none for single-agent envs). */
export function roleMetrics(rollouts: readonly Rollout[]): Record<string, number> {
  const byRole = new Map<string, Rollout[]>();
  for (const r of rollouts) {
    if (r.role === undefined) continue;
    const key = `role/${r.env}/${r.role}`;
    byRole.set(key, [...(byRole.get(key) ?? []), r]);
  }
  const out: Record<string, number> = {};
  for (const [prefix, traces] of byRole) {
    const ok = traces.filter((r) => !r.error);
    out[`${prefix}/traces`] = traces.length;
    out[`${prefix}/errors`] = traces.length - ok.length;
    if (ok.length === 0) continue;
    out[`${prefix}/reward`] = mean(ok.map((r) => r.reward));
    out[`${prefix}/trains`] = mean(ok.map((r) => (r.trains === false ? 0 : 1)));
    out[`${prefix}/completion_tokens`] = mean(
      ok.map((r) => r.segments.reduce((n, s) => n + (s.sampled ? s.tokenIds.length : 0), 0)),
    );
    Object.assign(out, metricMeans(prefix, ok));
  }
  return out;
}
