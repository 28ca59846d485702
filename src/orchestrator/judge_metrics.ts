// The judges' part of a step's metrics line, per env, over the step's scored rollouts (failed ones
// have no judgement): a judged env's `judge/<env>/score` (the judge's mean score, which is also its
// reward), `exact_reward` (the env's own reward of the same rollouts), `agree` (the share where
// both fall on the same side of 0.5), `turns` and `tool_calls` (agentic judges); agentic credit's
// `credit/<env>/weight` (the mean weight its judge gave a part). Absent when nothing was judged.
import type { Rollout } from "../data/types.ts";

const JUDGE_KEYS: Record<string, string> = {
  judge_score: "score",
  exact_reward: "exact_reward",
  judge_agrees: "agree",
  judge_turns: "turns",
  judge_tool_calls: "tool_calls",
};

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

export function judgeMetrics(rollouts: readonly Rollout[], envs: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const env of envs) {
    const scored = rollouts.filter((r) => r.env === env && !r.error);
    for (const [metric, key] of Object.entries(JUDGE_KEYS)) {
      const values = scored.flatMap((r) => (metric in r.metrics ? [r.metrics[metric]!] : []));
      if (values.length) out[`judge/${env}/${key}`] = mean(values);
    }
    const weights = scored.flatMap((r) => r.credit?.parts.map((p) => p.weight) ?? []);
    if (weights.length) out[`credit/${env}/weight`] = mean(weights);
  }
  return out;
}
