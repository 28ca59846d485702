// Adds a judged run's own numbers to its result row (experiments/scripts/judge_forth.sh): from the
// run's metrics.jsonl, the means over its steps of the judge's agreement with the env's exact
// reward, its mean score, the exact reward of the same rollouts, the judge's replies and tool calls
// per rollout, agentic credit's mean weight, and the failed share of rollouts (a judge that
// errs or stalls fails rollouts). A run that stopped before its first step has no metrics: the
// row then says so (`judge.steps = 0`). From the failed rollouts' records
// (rollouts/failed_step_N.jsonl) it adds what their judges did: `judge.failed` counts them, the
// judges' replies, the tool calls among those replies, the verdict calls, and the first error.
//
//   bun experiments/scripts/judge_stats.ts ROW.json RUN_DIR ENV
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseFailed } from "../../src/rundir/failed.ts";

const [rowFile, runDir, env] = process.argv.slice(2);
if (!rowFile || !runDir || !env) throw new Error("usage: judge_stats.ts ROW.json RUN_DIR ENV");
const file = join(runDir, "metrics.jsonl");
const rows: Array<Record<string, number>> = existsSync(file)
  ? readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l))
      .filter((r) => "rollouts/count" in r) // trained steps, not the step-0 eval line
  : [];

/** The mean over the steps that have `key`, or null when none has it. */
function mean(key: string): number | null {
  const values = rows.flatMap((r) => (typeof r[key] === "number" ? [r[key]] : []));
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
}

const row = JSON.parse(readFileSync(rowFile, "utf8"));
row.judge = {
  steps: rows.length,
  agree: mean(`judge/${env}/agree`),
  score: mean(`judge/${env}/score`),
  exact_reward: mean(`judge/${env}/exact_reward`),
  turns: mean(`judge/${env}/turns`),
  tool_calls: mean(`judge/${env}/tool_calls`),
  credit_weight: mean(`credit/${env}/weight`),
  train_reward: mean(`reward/${env}`),
  error_rate: mean("errors/rate"),
  failed: failedJudges(join(runDir, "rollouts")),
};

/** What the judges of the failed rollouts did, from their records. */
function failedJudges(dir: string) {
  const records = existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => /^failed_step_\d+\.jsonl$/.test(f))
        .flatMap((f) => parseFailed(readFileSync(join(dir, f), "utf8")))
    : [];
  const replies = records.flatMap((r) => (r.judge?.messages ?? []).filter((m) => m.role === "assistant"));
  const calls = replies.flatMap((m) => (m.tool_calls as Array<{ function: { name: string } }> | undefined) ?? []);
  return {
    rollouts: records.length,
    judged: records.filter((r) => r.judge).length,
    judge_replies: replies.length,
    judge_tool_calls: calls.length,
    verdict_calls: calls.filter((c) => c.function.name === "verdict").length,
    first_error: records[0]?.error ?? null,
  };
}
writeFileSync(rowFile, `${JSON.stringify(row, null, 2)}\n`);
console.log(`${rowFile}: judge ${JSON.stringify(row.judge)}`);
