// What a step's rollouts say, as metrics.jsonl keys (docs/run-directory.md, "Metrics"): rewards,
// errors and shapes overall and per env, the mean of each metric an env's rollouts report
// (`metric/<env>/<key>`); per role of a multi-agent env (`role/<env>/<role>/*`: traces, errors, and
// over the scored ones reward, completion tokens, the share that trains, the episode's own
// metrics); and a judged env's judgement (`judge/<env>/score`, `exact_reward`, `agree`: the share
// where judge and exact reward fall on the same side of 0.5, and `agree_right` / `agree_wrong`: that
// share among the rollouts the exact reward calls right / wrong, `turns` and `tool_calls` of agentic
// judges; agentic credit's `credit/<env>/weight`). Every mean is over scored rollouts: a failed
// one has no reward, no judgement and no metrics.
import type { Rollout } from "../../data/types.ts";
import { mean } from "../../algorithms/group.ts";

export type Metrics = Record<string, number>;

/**
 * Per-env and overall rollout statistics of one step's rollouts, and per env the mean of each
 * metric its rollouts report (`metric/<env>/<key>`: the env's own, an algorithm's such as
 * `distill_kept`). Reward and every per-rollout metric are means over the scored rollouts only: a
 * failed rollout has no reward (its 0 is a placeholder), so a step or env whose rollouts all failed
 * has no `reward` key at all (the console prints "-"), and `errors/*` beside it says how many failed.
 */
export function rolloutMetrics(rollouts: readonly Rollout[], envs: readonly string[]): Metrics {
  const ok = rollouts.filter((r) => !r.error);
  const sampled = (r: Rollout) => r.segments.reduce((n, s) => n + (s.sampled ? s.tokenIds.length : 0), 0);
  const out: Metrics = {
    ...meanOfScored("reward", ok, (r) => r.reward),
    "rollouts/count": rollouts.length,
    "errors/count": rollouts.length - ok.length,
    "errors/rate": rollouts.length ? (rollouts.length - ok.length) / rollouts.length : 0,
    ...meanOfScored("rollouts/completion_tokens", ok, sampled),
    ...meanOfScored("rollouts/turns", ok, (r) => r.numTurns),
    ...meanOfScored("rollouts/truncated", ok, (r) => (r.stopReason === "done" ? 0 : 1)),
    // A chat template that rewrote an earlier turn split a rollout into several samples (driver.ts).
    ...meanOfScored("rollouts/samples", ok, (r) => r.numSamples),
    "rollouts/extension_breaks": ok.reduce((n, r) => n + r.numSamples - 1, 0),
  };
  for (const env of envs) {
    const mine = rollouts.filter((r) => r.env === env);
    if (mine.length === 0) continue;
    const good = mine.filter((r) => !r.error);
    Object.assign(
      out,
      meanOfScored(`reward/${env}`, good, (r) => r.reward),
    );
    out[`rollouts/${env}`] = mine.length;
    out[`errors/${env}`] = mine.length - good.length;
    Object.assign(out, metricMeans(`metric/${env}`, good));
  }
  return out;
}

/** `{prefix/key: mean}` for each metric the scored rollouts report, over those that report it. */
export function metricMeans(prefix: string, scored: readonly Rollout[]): Metrics {
  const out: Metrics = {};
  for (const key of new Set(scored.flatMap((r) => Object.keys(r.metrics)))) {
    const values = scored.flatMap((r) => (typeof r.metrics[key] === "number" ? [r.metrics[key]] : []));
    if (values.length) out[`${prefix}/${key}`] = mean(values);
  }
  return out;
}

/** `{key: mean}` over the scored rollouts, or `{}` when there is none (a mean of nothing is not 0). */
function meanOfScored(key: string, scored: readonly Rollout[], value: (r: Rollout) => number): Metrics {
  return scored.length ? { [key]: mean(scored.map(value)) } : {};
}

/** The `role/<env>/<role>/*` keys of the rollouts that carry a role (none for single-agent envs). */
export function roleMetrics(rollouts: readonly Rollout[]): Metrics {
  const byRole = new Map<string, Rollout[]>();
  for (const r of rollouts) {
    if (r.role === undefined) continue;
    const key = `role/${r.env}/${r.role}`;
    byRole.set(key, [...(byRole.get(key) ?? []), r]);
  }
  const out: Metrics = {};
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

const JUDGE_KEYS: Record<string, string> = {
  judge_score: "score",
  exact_reward: "exact_reward",
  judge_agrees: "agree",
  judge_turns: "turns",
  judge_tool_calls: "tool_calls",
};

/** `judge/<env>/*` and `credit/<env>/weight`: a judged env's judgement of its scored rollouts. */
export function judgeMetrics(rollouts: readonly Rollout[], envs: readonly string[]): Metrics {
  const out: Metrics = {};
  for (const env of envs) {
    const scored = rollouts.filter((r) => r.env === env && !r.error);
    for (const [metric, key] of Object.entries(JUDGE_KEYS)) {
      const values = scored.flatMap((r) => (metric in r.metrics ? [r.metrics[metric]!] : []));
      if (values.length) out[`judge/${env}/${key}`] = mean(values);
    }
    // agreement within each class of the exact reward (right: >= 0.5): balanced accuracy is their mean
    for (const [key, right] of [
      ["agree_right", true],
      ["agree_wrong", false],
    ] as const) {
      const inClass = scored.filter((r) => "exact_reward" in r.metrics && r.metrics.exact_reward! >= 0.5 === right);
      if (inClass.length) out[`judge/${env}/${key}`] = mean(inClass.map((r) => r.metrics.judge_agrees!));
    }
    const weights = scored.flatMap((r) => r.credit?.parts.map((p) => p.weight) ?? []);
    if (weights.length) out[`credit/${env}/weight`] = mean(weights);
  }
  return out;
}
