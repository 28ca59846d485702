// Failed rollouts in a step's metrics: reward and every per-rollout metric are means
// over the scored rollouts only, absent (not 0) when none was scored, with the failure count
// beside them; the console line prints an absent reward as "-". Rollout metrics likewise, per env.
import { expect, test } from "bun:test";
import { consoleLine } from "../../../src/orchestrator/metrics/log.ts";
import { rolloutMetrics } from "../../../src/orchestrator/metrics/rollouts.ts";
import { collectedMetrics } from "../../../src/orchestrator/collect.ts";
import { singleTurn } from "../../fixtures/rollouts.ts";

const failed = (env: string) =>
  singleTurn(0, 3, 2, { env, error: "teacher: connection refused", stopReason: "error", numTurns: 1 });

test("an env whose rollouts all failed has no reward, only its failure count", () => {
  const rollouts = [
    singleTurn(1, 3, 4, { env: "forth", numTurns: 1 }),
    singleTurn(0.5, 3, 2, { env: "forth", numTurns: 1, stopReason: "length" }),
    ...[1, 2, 3, 4].map(() => failed("math")),
  ];
  const m = rolloutMetrics(rollouts, ["math", "forth"]);
  expect("reward/math" in m).toBe(false);
  expect(m["errors/math"]).toBe(4);
  expect(m["rollouts/math"]).toBe(4);
  expect(m["reward/forth"]).toBe(0.75);
  expect(m["errors/forth"]).toBe(0);
  // the run-wide means are over the two scored rollouts, not the six
  expect(m.reward).toBe(0.75);
  expect(m["rollouts/completion_tokens"]).toBe(3);
  expect(m["rollouts/truncated"]).toBe(0.5);
  expect(m["errors/count"]).toBe(4);
  expect(m["errors/rate"]).toBeCloseTo(4 / 6, 12);

  const line = consoleLine(3, 10, m, ["math", "forth"]);
  expect(line).toContain("reward math - forth 0.750");
  expect(line).toContain("errors 4");
});

test("a step whose rollouts all failed has no reward and no per-rollout means at all", () => {
  const m = rolloutMetrics([failed("math"), failed("math")], ["math"]);
  for (const key of ["reward", "reward/math", "rollouts/completion_tokens", "rollouts/turns", "rollouts/truncated"])
    expect(key in m).toBe(false);
  expect(m).toMatchObject({ "rollouts/count": 2, "errors/count": 2, "errors/rate": 1, "errors/math": 2 });
  // what reaches metrics.jsonl: the staleness of no scored rollout is absent too
  const line = collectedMetrics(
    4,
    {
      groups: [[failed("math"), failed("math")]],
      kept: [],
      filteredSamples: 0,
      zeroedTokens: 0,
      dropped: 0,
      emptyRetries: 0,
      frozenEnvs: new Set(),
      admission: new Map(),
      replayed: new Set(),
    },
    ["math"],
    1,
  );
  expect(line).not.toHaveProperty("reward/math");
  expect(line).not.toHaveProperty("off_policy/max");
  expect(line["errors/math"]).toBe(2);
});

test("each env's rollout metrics are averaged over its scored rollouts that report them", () => {
  const rollouts = [
    singleTurn(1, 3, 2, { env: "math", metrics: { correct: 1, formatted: 1 } }),
    singleTurn(0, 3, 2, { env: "math", metrics: { correct: 0, formatted: 1, distill_kept: 0.25 } }),
    singleTurn(0, 3, 2, { env: "math", error: "teacher: 500", stopReason: "error", metrics: { error: 1, correct: 1 } }),
    singleTurn(1, 3, 2, { env: "forth", metrics: { correct: 1 } }),
  ];
  const m = rolloutMetrics(rollouts, ["math", "forth"]);
  expect(m["metric/math/correct"]).toBe(0.5); // the failed rollout's 1 is not counted
  expect(m["metric/math/formatted"]).toBe(1);
  expect(m["metric/math/distill_kept"]).toBe(0.25); // only the rollout that reports it
  expect("metric/math/error" in m).toBe(false);
  expect(m["metric/forth/correct"]).toBe(1);
});
