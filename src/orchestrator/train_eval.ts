// `[orchestrator.eval]` during training: the held-out tasks of each eval env, rolled out k times
// on the live policy (src/eval/evaluate.ts: avg@k, pass@k), before the first step and
// whenever the policy has just loaded a version that is a multiple of `interval` or the last.
// The results go into that step's metrics line as `eval/<env>/...` (step 0 for the base model).
//
// The weight watcher runs the eval right after the policy loaded the version and before it loads
// any newer one, so an eval always measures exactly one version.
import type { ResolvedConfig } from "../config/resolve.ts";
import type { ChatRenderer } from "../model/render.ts";
import { type EvalSettings, evalMetrics, evaluate, loadEvalTasks } from "../eval/evaluate.ts";
import { remoteSettings } from "../envs/index.ts";
import type { LivePolicy } from "../processes/live_policy.ts";

type Loaded = Awaited<ReturnType<typeof loadEvalTasks>> & { settings: EvalSettings };

export class TrainEval {
  private constructor(
    private readonly envs: Loaded[],
    private readonly interval: number,
    private readonly maxSteps: number,
    private readonly policy: LivePolicy,
    private readonly renderer: ChatRenderer,
  ) {}

  /** The evaluator of a config, or undefined without `[orchestrator.eval]`. */
  static async create(
    config: ResolvedConfig,
    policy: LivePolicy,
    renderer: ChatRenderer,
  ): Promise<TrainEval | undefined> {
    const block = config.orchestrator.eval;
    if (!block) return undefined;
    const orch = config.orchestrator;
    const envs = await Promise.all(
      block.env.map(async (entry) => ({
        ...(await loadEvalTasks({
          ...(entry.name ? { name: entry.name } : {}),
          id: entry.id,
          args: entry.args,
          remote: remoteSettings(entry.remote),
          numExamples: block.num_examples,
          seed: config.seed,
        })),
        settings: {
          k: block.k,
          greedy: block.greedy,
          temperature: entry.temperature ?? orch.temperature,
          maxTokens: entry.max_tokens ?? orch.max_tokens,
          seed: config.seed,
          maxContextTokens: orch.seq_len,
          contextLimit: entry.context_limit,
          templateArgs: orch.chat_template_kwargs,
        },
      })),
    );
    return new TrainEval(envs, block.interval, config.max_steps, policy, renderer);
  }

  /** Whether the weights of step `version` get evaluated (0: the starting model). */
  due(version: number): boolean {
    return version === 0 || version === this.maxSteps || version % this.interval === 0;
  }

  /** Evaluates the policy as it is now: `eval/<env>/<metric>` plus `time/eval`. */
  async run(): Promise<Record<string, number>> {
    const started = performance.now();
    const out: Record<string, number> = {};
    for (const env of this.envs) {
      const result = await evaluate(this.policy.client, this.renderer, env.name, env.env, env.tasks, env.settings);
      Object.assign(out, evalMetrics(result));
    }
    out["time/eval"] = (performance.now() - started) / 1000;
    return out;
  }
}
