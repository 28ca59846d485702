// Evaluation: a model (any SamplingClient: in-process, `rlx serve`, vLLM) on an environment's
// held-out tasks. Each task is rolled out k times at the eval temperature, plus optionally once
// greedily, through the same rollout driver training uses, so an eval measures exactly the
// behaviour RL trains. Used by `rlx eval`, by `rlx sft` between steps, and by the train loop for
// `[orchestrator.eval]`.
//
// Metrics per env (keys without a prefix; evalMetrics adds `eval/<env>/`):
//   avg@k          mean reward over all k samples of all tasks
//   pass@j         for j = 1, 2, 4, ... <= k and j = k: the unbiased estimator from k samples per
//                  task, 1 - C(k-c, j) / C(k, j), averaged over tasks (Chen et al. 2021; c = samples
//                  with reward >= successThreshold, default 1: binary rewards, as the built-ins give)
//   greedy/pass@1  fraction of tasks solved by the temperature-0 sample (when `greedy`)
//   error_rate     rollouts that failed (endpoint down, tool crash, context limit): they score 0
//   truncated      rollouts cut short (token or turn limit); completion_tokens: mean sampled tokens
//   metric/<name>  the mean of each of the env's reward components (e.g. metric/formatted)
// Failures are data here as in training: an eval never throws for a failed rollout; the caller
// decides what an error_rate of 1 means (rlx eval stops with the first error's message).
import { createEnv, loadEnv, type RemoteSettings } from "../envs/index.ts";
import type { Env, Task } from "../envs/types.ts";
import type { SamplingClient } from "../clients/types.ts";
import type { ChatMessage } from "../data/chat.ts";
import type { ChatRenderer } from "../model/render.ts";
import { runRollout } from "../rollout/driver.ts";
import type { ContextLimitPolicy } from "../rollout/sequence.ts";
import type { Rollout } from "../data/types.ts";
import { mean } from "../algorithms/group.ts";

export interface EvalSettings {
  /** Samples per task at `temperature`. */
  k: number;
  temperature: number;
  maxTokens: number;
  topP?: number;
  topK?: number;
  /** Also one temperature-0 sample per task: greedy/pass@1. */
  greedy?: boolean;
  seed?: number;
  /** Rollouts in flight at once (default 64): what lets a batching engine batch. */
  concurrency?: number;
  maxContextTokens?: number;
  /** A later turn's prompt past maxContextTokens: fail the rollout (default) or end it there. */
  contextLimit?: ContextLimitPolicy;
  /** Extra chat-template variables (e.g. `{ enable_thinking: false }`). */
  templateArgs?: Record<string, unknown>;
  timeoutMs?: number;
  /** A sample with reward >= this counts as solved (default 1). */
  successThreshold?: number;
  /** Called after each finished rollout. */
  onProgress?: (done: number, total: number) => void;
}

export interface TaskEval {
  taskId: string;
  /** The k sampled rewards, in sample order. */
  rewards: number[];
  /** Samples with reward >= the success threshold. */
  solved: number;
  greedyReward?: number;
  errors: number;
  /** The first sample's last assistant turn (text, then tool calls as name(args)), for reading what the model does. */
  firstReply: string;
}

export interface EnvEval {
  env: string;
  tasks: number;
  k: number;
  metrics: Record<string, number>;
  results: TaskEval[];
  /** The first failed rollout's error, if any. */
  firstError?: string;
  seconds: number;
}

/**
 * The last assistant turn as text: its content, then each tool call as `name({...args})`, so a
 * tool env's reply reads as what the model did even when the episode ended on a tool message.
 */
export function lastReply(messages: readonly ChatMessage[]): string {
  const turn = messages.findLast((m) => m.role === "assistant");
  if (!turn) return "";
  const calls = (turn.tool_calls ?? []).map(
    (call) => `${call.function.name}(${JSON.stringify(call.function.arguments)})`,
  );
  return [turn.content, ...calls].filter((part) => part.length > 0).join("\n");
}

/** Unbiased pass@k from n samples of which c are correct: 1 - C(n-c, k) / C(n, k), in the stable product form. */
export function passAtK(n: number, c: number, k: number): number {
  if (k > n || k < 1) throw new RangeError(`pass@${k} needs 1 <= k <= n = ${n}`);
  if (n - c < k) return 1;
  let fail = 1;
  for (let i = n - c + 1; i <= n; i++) fail *= 1 - k / i;
  return 1 - fail;
}

/** The j of pass@j reported for k samples: powers of two up to k, and k. */
export function passKs(k: number): number[] {
  const ks: number[] = [];
  for (let j = 1; j <= k; j *= 2) ks.push(j);
  if (ks.at(-1) !== k) ks.push(k);
  return ks;
}

/** pass@j over tasks for each j of passKs(k) and, with `greedy`, greedy/pass@1 (a greedy reward >= threshold). */
export function passMetrics(
  results: readonly TaskEval[],
  k: number,
  threshold: number,
  greedy: boolean,
): Record<string, number> {
  const metrics: Record<string, number> = {};
  for (const j of passKs(k)) metrics[`pass@${j}`] = mean(results.map((r) => passAtK(k, r.solved, j)));
  if (greedy) metrics["greedy/pass@1"] = mean(results.map((r) => (r.greedyReward! >= threshold ? 1 : 0)));
  return metrics;
}

function completionTokens(rollout: Rollout): number {
  return rollout.segments.reduce((n, s) => n + (s.sampled ? s.tokenIds.length : 0), 0);
}

/** Runs `jobs` with at most `limit` in flight. */
async function pool(count: number, limit: number, run: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await run(next++);
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, worker));
}

/** Evaluates `client` on `tasks` of `env` (named `name` in metrics and rollout ids). */
export async function evaluate(
  client: SamplingClient,
  renderer: ChatRenderer,
  name: string,
  env: Env,
  tasks: readonly Task[],
  settings: EvalSettings,
): Promise<EnvEval> {
  const started = performance.now();
  const { k } = settings;
  const greedy = settings.greedy === true;
  const perTask = k + (greedy ? 1 : 0);
  const threshold = settings.successThreshold ?? 1;
  const rollouts: Rollout[][] = tasks.map(() => []);
  const total = tasks.length * perTask;
  let done = 0;
  await pool(total, Math.max(1, settings.concurrency ?? 64), async (job) => {
    const t = Math.floor(job / perTask);
    const j = job % perTask;
    const task = tasks[t]!;
    const isGreedy = j === k;
    // Distinct seeds per (task, sample), the same with or without the greedy sample, with room
    // for 64 turns each (the driver adds the turn).
    const seed = (settings.seed ?? 0) + (t * k + (isGreedy ? 0 : j)) * 64;
    rollouts[t]![j] = await runRollout({
      id: `eval-${name}-${t}-${isGreedy ? "greedy" : j}`,
      groupId: `eval-${name}-${t}`,
      envId: name,
      env,
      task,
      client,
      renderer,
      sampling: {
        maxTokens: settings.maxTokens,
        temperature: isGreedy ? 0 : settings.temperature,
        topP: isGreedy ? 1 : (settings.topP ?? 1),
        topK: isGreedy ? 0 : (settings.topK ?? 0),
        seed,
      },
      maxContextTokens: settings.maxContextTokens,
      contextLimit: settings.contextLimit,
      templateArgs: settings.templateArgs,
      timeoutMs: settings.timeoutMs,
    });
    settings.onProgress?.(++done, total);
  });

  const all = rollouts.flat();
  const sampled = rollouts.flatMap((r) => r.slice(0, k));
  const results: TaskEval[] = rollouts.map((r, t) => {
    const rewards = r.slice(0, k).map((x) => x.reward);
    return {
      taskId: tasks[t]!.id,
      rewards,
      solved: rewards.filter((x) => x >= threshold).length,
      ...(greedy ? { greedyReward: r[k]!.reward } : {}),
      errors: r.filter((x) => x.error !== undefined).length,
      firstReply: r[0] ? lastReply(r[0].messages) : "",
    };
  });
  const metrics: Record<string, number> = {
    [`avg@${k}`]: mean(sampled.map((r) => r.reward)),
    ...passMetrics(results, k, threshold, greedy),
  };
  metrics.error_rate = mean(all.map((r) => (r.error === undefined ? 0 : 1)));
  metrics.truncated = mean(all.map((r) => (r.stopReason === "done" || r.stopReason === "error" ? 0 : 1)));
  metrics.completion_tokens = mean(sampled.map(completionTokens));
  const components = new Set(sampled.flatMap((r) => (r.error === undefined ? Object.keys(r.metrics) : [])));
  for (const c of components)
    metrics[`metric/${c}`] = mean(sampled.filter((r) => r.error === undefined).map((r) => r.metrics[c] ?? 0));
  const firstError = all.find((r) => r.error !== undefined)?.error;
  return {
    env: name,
    tasks: tasks.length,
    k,
    metrics,
    results,
    ...(firstError ? { firstError } : {}),
    seconds: (performance.now() - started) / 1000,
  };
}

/** "12.5% of math rollouts failed (scored 0); the first: ...", or undefined when none failed. */
export function failedRolloutsLine(result: EnvEval): string | undefined {
  if (!result.firstError) return undefined;
  const percent = (result.metrics.error_rate! * 100).toFixed(1);
  return `${percent}% of ${result.env} rollouts failed (scored 0); the first: ${result.firstError}`;
}

/** The env's metrics under `<prefix>/<env>/`, as metrics.jsonl holds them (e.g. eval/math/pass@1). */
export function evalMetrics(result: EnvEval, prefix = "eval"): Record<string, number> {
  return Object.fromEntries(
    Object.entries(result.metrics).map(([key, value]) => [`${prefix}/${result.env}/${key}`, value]),
  );
}

/** Where an eval's tasks come from: an env (built-in id or .ts path) with its args. */
export interface EvalEnvSpec {
  /** Name in metrics; defaults to the env's own id (for a custom env file, its `id`, not the path). */
  name?: string;
  id: string;
  args?: Record<string, unknown>;
  /** When `id` is an env server's URL: its settings (absent: the defaults). */
  remote?: RemoteSettings;
  /** Held-out tasks to use: the first N of the eval split; -1 = all. */
  numExamples: number;
  /** Seed passed to the env's load (it only orders/samples the split). */
  seed?: number;
}

/** Creates the env and loads the first `numExamples` tasks of its held-out (eval) split. */
export async function loadEvalTasks(spec: EvalEnvSpec): Promise<{ name: string; env: Env; tasks: Task[] }> {
  const definition = await loadEnv(spec.id, undefined, spec.remote);
  const name = spec.name ?? definition.id;
  const env = await createEnv(definition, spec.args ?? {}, { source: `eval env ${name}`, path: ["args"] }, spec.id);
  const tasks = await env.load("eval", spec.seed ?? 0);
  return { name, env, tasks: spec.numExamples < 0 ? tasks : tasks.slice(0, spec.numExamples) };
}
