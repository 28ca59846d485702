// Everything the step loop needs per train env, built once at the start of `rlx train`: the env
// (its definition loaded, args validated, train tasks loaded), its algorithm instance (built-in or
// custom, `setup(ctx)` run with the policy, the tokenizer and a way to connect frozen endpoints),
// its sampler and per-task statistics (src/task_samplers/), and its sampling client (the live policy,
// or the frozen `sampling.source` endpoint).
//
// A train env with a `judge` block gets the judge's score as its reward (src/judges/judge.ts),
// and every env's rewards run through its reward gate (concurrency, timeout).
//
// Frozen endpoints (teachers, judges) are connected once per (base_url, name) and waited for
// (GET /v1/models answers) before the first rollout, so a teacher that is not up yet reads as "not
// reachable" at start-up, not as a run of failed rollouts.
import type { Algorithm, AlgorithmContext, FrozenClient, LossComponent } from "../algorithms/base.ts";
import { algorithmName, createAlgorithm } from "../algorithms/registry.ts";
import type { FrozenModel } from "../algorithms/schemas.ts";
import { type ResolvedConfig, type ResolvedEnv, runView } from "../config/resolve.ts";
import type { Rollout, Task } from "../data/types.ts";
import { createEnv, loadEnv, remoteSettings } from "../envs/index.ts";
import type { Env } from "../envs/types.ts";
import { ConfigError, EndpointError, keyPath } from "../errors.ts";
import { type ChatClient, OpenAIChatClient } from "../clients/chat_client.ts";
import { OpenAIClient } from "../clients/client.ts";
import { CallGate } from "../clients/gate.ts";
import { JsonEndpoint } from "../clients/http.ts";
import type { SamplingClient } from "../clients/types.ts";
import { createJudge } from "../judges/index.ts";
import { judgedEnv } from "../judges/judge.ts";
import type { JudgeEndpoint } from "../judges/schema.ts";
import type { ChatRenderer } from "../model/render.ts";
import { keySite } from "../plugin.ts";
import type { RolePlayer } from "../rollout/episode.ts";
import type { Tokenizer } from "../model/tokenizer.ts";
import type { Sampler } from "../task_samplers/base.ts";
import { createSampler } from "../task_samplers/registry.ts";
import { TaskStats } from "../task_samplers/stats.ts";
import { BarrierBook } from "./barriers.ts";
import type { LivePolicy } from "../processes/live_policy.ts";

/** One train env, ready to sample from. */
export interface TrainEnv {
  resolved: ResolvedEnv;
  env: Env;
  tasks: readonly Task[];
  algorithm: Algorithm<any>;
  /** The algorithm's name in audit records (built-in type or custom class type). */
  algoName: string;
  lossType: LossComponent;
  /** The live policy's client, or the env's frozen sampling source. */
  client: SamplingClient;
  /** Rollouts from a frozen source never go stale. */
  frozen: boolean;
  /** Which tasks the env draws, which groups it admits, what it replays. */
  sampler: Sampler<any>;
  /** The env's per-task statistics (the orchestrator records every finished fresh group). */
  stats: TaskStats;
  /** The env's reward calls: at most `reward.concurrency` at once, each within `reward.timeout_s`. */
  rewardGate: CallGate;
  /** Rollouts waiting on their algorithm's own barriers, and the open sets (barriers.ts). */
  barriers: BarrierBook;
  /** A multi-agent env's roles that have an algorithm of their own (the others use `algorithm`). */
  roleAlgorithms?: Map<string, RoleAlgorithm>;
  /** A multi-agent env's configured roles: who plays each, whether it trains. */
  players?: Map<string, RolePlayer>;
}

/** A role's own algorithm, with what the samples and audit records name. */
export interface RoleAlgorithm {
  algorithm: Algorithm<any>;
  algoName: string;
  lossType: LossComponent;
}

/** The algorithm that scores a rollout: its role's own, or the env's. */
export function algorithmOf(train: Pick<TrainEnv, "algorithm" | "roleAlgorithms">, rollout: Rollout): Algorithm<any> {
  return (rollout.role !== undefined && train.roleAlgorithms?.get(rollout.role)?.algorithm) || train.algorithm;
}

/** An env's barrier book over its algorithm and its roles' own (keyed "" and by role). */
export function barrierBook(
  algorithm: Algorithm<any>,
  roles: ReadonlyMap<string, RoleAlgorithm>,
  maxOffPolicySteps: number,
  settle?: Env["settle"],
): BarrierBook {
  const algorithms = new Map([["", algorithm], ...[...roles].map(([role, r]) => [role, r.algorithm] as const)]);
  return new BarrierBook(
    algorithms,
    (r) => (r.role !== undefined && roles.has(r.role) ? r.role : ""),
    maxOffPolicySteps,
    settle,
  );
}

/** The gate of an env's reward calls, from its `reward = { concurrency, timeout_s }`. */
export function rewardGate(env: ResolvedEnv): CallGate {
  return new CallGate({ concurrency: env.reward.concurrency, timeoutMs: env.reward.timeout_s * 1000 });
}

/** The env's sampler and the statistics it reads, for the train env at `index` of the config. */
export async function createEnvSampler(
  config: ResolvedConfig,
  source: string,
  index: number,
  tasks: readonly Task[],
): Promise<{ sampler: Sampler<any>; stats: TaskStats }> {
  const env = config.orchestrator.train.env[index]!;
  const orch = config.orchestrator;
  const stats = new TaskStats(env.sampler.pass_reward);
  const ctx = {
    env: env.name,
    tasks,
    seed: config.seed,
    groupSize: env.group_size,
    batchSize: orch.batch_size,
    stats,
  };
  // an env that inherits the run default holds a copy of it: errors then name the default's key
  const inherited = JSON.stringify(env.sampler) === JSON.stringify(orch.sampler);
  const path = inherited ? ["orchestrator", "sampler"] : ["orchestrator", "train", "env", index, "sampler"];
  const run = { batchSize: orch.batch_size, maxOffPolicySteps: orch.max_off_policy_steps };
  return { sampler: await createSampler(env.sampler, ctx, { source, path }, run), stats };
}

export interface SetupOptions {
  config: ResolvedConfig;
  /** The config file, for error messages. */
  source: string;
  policy: LivePolicy;
  /** A copy of the policy that takes its weights every `every` steps (absent: none can be made). */
  laggedPolicy?: (every: number) => Promise<SamplingClient>;
  tokenizer: Tokenizer;
  renderer: ChatRenderer;
  info: (line: string) => void;
  warn: (line: string) => void;
  /** How long to wait for a frozen endpoint to answer. */
  connectTimeoutMs?: number;
}

/** Waits until GET {base_url}/models answers. */
async function waitForEndpoint(model: Pick<FrozenModel, "name" | "base_url">, timeoutMs: number): Promise<void> {
  const endpoint = new JsonEndpoint(model.base_url.replace(/\/+$/, ""), {
    timeoutMs: 5000,
    retries: 0,
    backoffMs: 0,
    concurrency: 4,
  });
  const deadline = performance.now() + timeoutMs;
  let last = "";
  while (performance.now() < deadline) {
    try {
      await endpoint.request("/models");
      return;
    } catch (err) {
      last = (err as Error).message;
      await Bun.sleep(250);
    }
  }
  throw new EndpointError(
    `the frozen model "${model.name}" at ${model.base_url} is not reachable after ${Math.round(timeoutMs / 1000)} s (${last})`,
    {
      fix: `start it first, e.g. rlx serve --model TEACHER_DIR --port ${new URL(model.base_url).port || 8001}`,
    },
  );
}

/** One algorithm instance per train env (instances hold per-env state), keyed by env name. */
export async function createEnvAlgorithms(
  config: ResolvedConfig,
  source: string,
): Promise<{ algorithms: Map<string, Algorithm<any>>; warnings: string[] }> {
  const algorithms = new Map<string, Algorithm<any>>();
  const warnings: string[] = [];
  const run = runView(config);
  for (const [i, env] of config.orchestrator.train.env.entries()) {
    const path = ["orchestrator", "train", "env", i];
    const site = { source, path: [...path, "algo"], env: { path, name: env.name, groupSize: env.group_size } };
    const created = await createAlgorithm(env.algo, site, run);
    algorithms.set(env.name, created.algorithm);
    warnings.push(...created.warnings);
  }
  return { algorithms, warnings };
}

/** Builds every train env's env, tasks, algorithm and sampling client. */
export async function setupTrainEnvs(o: SetupOptions): Promise<TrainEnv[]> {
  const connections = new Map<string, Promise<FrozenClient>>();
  const connect = (model: FrozenModel): Promise<FrozenClient> => {
    const key = `${model.base_url}#${model.name}`;
    let client = connections.get(key);
    if (!client) {
      const apiKey = model.api_key_var ? process.env[model.api_key_var] : undefined;
      client = waitForEndpoint(model, o.connectTimeoutMs ?? 60_000).then(
        () => new OpenAIClient({ model: model.name, baseUrls: [model.base_url], ...(apiKey ? { apiKey } : {}) }),
      );
      connections.set(key, client);
    }
    return client;
  };
  const judges = new Map<string, Promise<ChatClient>>();
  const connectJudge = (judge: JudgeEndpoint): Promise<ChatClient> => {
    const key = `${judge.base_url}#${judge.name}`;
    let client = judges.get(key);
    if (!client) {
      const apiKey = judge.api_key_var ? process.env[judge.api_key_var] : undefined;
      client = waitForEndpoint(judge, o.connectTimeoutMs ?? 60_000).then(
        () => new OpenAIChatClient(judge.name, judge.base_url, apiKey ? { apiKey } : {}),
      );
      judges.set(key, client);
    }
    return client;
  };

  const { algorithms, warnings } = await createEnvAlgorithms(o.config, o.source);
  for (const warning of warnings) o.warn(warning);
  const envs: TrainEnv[] = [];
  for (const [index, resolved] of o.config.orchestrator.train.env.entries()) {
    const entry = { source: o.source, path: ["orchestrator", "train", "env", index] };
    const exact = await createEnv(
      await loadEnv(resolved.id, keySite(entry, "id"), remoteSettings(resolved.remote)),
      resolved.args,
      keySite(entry, "args"),
      resolved.id,
    );
    const judge = resolved.judge;
    const env = judge
      ? judgedEnv(exact, await createJudge(judge, await connectJudge(judge), exact, keySite(entry, "judge")))
      : exact;
    const tasks = await env.load("train", o.config.seed);
    const { sampler, stats } = await createEnvSampler(o.config, o.source, index, tasks);
    const algorithm = algorithms.get(resolved.name)!;
    const ctx: AlgorithmContext = {
      env: resolved.name,
      policy: o.policy.client,
      ...(o.laggedPolicy ? { laggedPolicy: o.laggedPolicy } : {}),
      maxTokens: resolved.max_tokens,
      connect,
      connectJudge,
      tokenizer: o.tokenizer,
      renderer: o.renderer,
      logger: {
        info: (line) => o.info(`${resolved.name}: ${line}`),
        warn: (line) => o.warn(`${resolved.name}: ${line}`),
      },
    };
    await algorithm.setup(ctx);
    const source = algorithm.config.sampling.source;
    const frozen = source !== "policy";
    const { roleAlgorithms, players } = await setupRoles(resolved, env, index, o, ctx, connect);
    envs.push({
      resolved,
      env,
      tasks,
      algorithm,
      algoName: algorithmName(algorithm),
      lossType: algorithm.actionLoss,
      client: frozen ? await connect(source) : o.policy.client,
      frozen,
      sampler,
      stats,
      rewardGate: rewardGate(resolved),
      barriers: barrierBook(
        algorithm,
        roleAlgorithms,
        o.config.orchestrator.max_off_policy_steps,
        env.settle?.bind(env),
      ),
      roleAlgorithms,
      players,
    });
  }
  return envs;
}

/** A multi-agent env's configured roles: each one's player (policy or frozen endpoint) and, for a
 * role with its own algo block, its algorithm (set up like the env's). */
async function setupRoles(
  resolved: ResolvedEnv,
  env: Env,
  index: number,
  o: SetupOptions,
  ctx: AlgorithmContext,
  connect: (model: FrozenModel) => Promise<FrozenClient>,
): Promise<{ roleAlgorithms: Map<string, RoleAlgorithm>; players: Map<string, RolePlayer> }> {
  const roleAlgorithms = new Map<string, RoleAlgorithm>();
  const players = new Map<string, RolePlayer>();
  const path = ["orchestrator", "train", "env", index];
  for (const [role, block] of Object.entries(resolved.roles)) {
    checkRole(role, env, resolved.name, `${o.source}: ${keyPath([...path, "roles", role])}`);
    const client = block.source === "policy" ? o.policy.client : await connect(block.source);
    players.set(role, { client, trains: block.train });
    if (!block.algo) continue;
    const site = { source: o.source, path: [...path, "roles", role, "algo"] };
    const { algorithm, warnings } = await createAlgorithm(block.algo, site, runView(o.config));
    for (const warning of warnings) o.warn(warning);
    await algorithm.setup(ctx);
    roleAlgorithms.set(role, {
      algorithm,
      algoName: algorithmName(algorithm),
      lossType: algorithm.kind.actionLossType,
    });
  }
  return { roleAlgorithms, players };
}

/** A configured role must be one the env plays: `at` is the role's key path in the config file. */
export function checkRole(role: string, env: Pick<Env, "episode" | "roles">, name: string, at: string): void {
  if (!env.episode)
    throw new ConfigError(`${at}: env "${name}" is single-agent (it has no episode()), so it has no roles`, {
      fix: 'remove the roles table, or use a multi-agent env (docs/algorithms.md, "Roles")',
    });
  if (env.roles && !env.roles.includes(role))
    throw new ConfigError(`${at}: env "${name}" has no role "${role}"; its roles: ${env.roles.join(", ")}`, {
      fix: "name one of its roles",
    });
}
