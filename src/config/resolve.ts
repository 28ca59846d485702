// Per-environment resolution of a run config. Every train env ends with its own fully spelled-out
// algorithm (a deep copy of [orchestrator.algo] unless it sets `algo`), sampler (likewise from
// [orchestrator.sampler]), group size, temperature, token limit and rl loss (its algo block's
// `loss`, else [trainer.loss]; none for a built-in whose action tokens skip the rl component). Algo and sampler blocks are
// parsed and checked by their registries (src/algorithms/registry.ts, src/task_samplers/registry.ts),
// env args by each env's schema, the run-wide rules here. Errors name
// the key path the user typed; rules that are legal but almost certainly a mistake become warnings.
import type { AlgorithmClass, RunView } from "../algorithms/base.ts";
import type { FrozenModel } from "../algorithms/schemas.ts";
import { resolveLoss, runLoss } from "../algorithms/loss_schema.ts";
import { distillTemperatureRule } from "../algorithms/distill.ts";
import type { RlLoss } from "../data/loss_types.ts";
import {
  type AlgoConfig,
  type AlgoSite,
  BUILTIN_ALGORITHMS,
  checkAlgorithm,
  parseAlgoConfig,
} from "../algorithms/registry.ts";
import { checkEnvArgs } from "../envs/index.ts";
import { BUILTIN_SAMPLERS, checkSampler, parseSamplerConfig, type SamplerConfig } from "../task_samplers/registry.ts";
import { ConfigError, keyPath } from "../errors.ts";
import { checkPluginFile, keySite, type PluginSite } from "../plugin.ts";
import type { EnvEntry, RawConfig } from "./schema.ts";

export interface ResolvedEnv extends Omit<
  EnvEntry,
  "algo" | "sampler" | "name" | "group_size" | "temperature" | "max_tokens" | "roles"
> {
  /** A multi-agent env's roles: who plays each, whether it trains, and its own algorithm if it has one. */
  roles: Record<string, ResolvedRole>;
  name: string;
  group_size: number;
  temperature: number;
  max_tokens: number;
  algo: AlgoConfig;
  sampler: SamplerConfig;
  /** The rl loss of this env's samples, every setting spelled out (docs/architecture.md §6): its
   * algo block's `loss` (unset keys: the schema's defaults, constant: orchestrator.max_tokens),
   * else [trainer.loss]. Undefined for a built-in algorithm whose action tokens go to another
   * component (a custom one's class is loaded later, so it gets one). Derived, so the resolved TOML
   * leaves it out (resolvedToml in load.ts); re-resolving gives it again. */
  loss?: RlLoss;
}

export interface ResolvedRole {
  source: "policy" | FrozenModel;
  train: boolean;
  algo?: AlgoConfig;
}

export interface ResolvedConfig extends Omit<RawConfig, "orchestrator"> {
  orchestrator: Omit<RawConfig["orchestrator"], "train" | "algo" | "sampler"> & {
    algo: AlgoConfig;
    sampler: SamplerConfig;
    train: { env: ResolvedEnv[] };
  };
}

export interface Resolution {
  config: ResolvedConfig;
  warnings: string[];
}

const normalizeUrl = (url: string) => url.replace(/\/+$/, "").replace("//localhost", "//127.0.0.1");

/** What an algorithm's own rules may ask of the run: whether a URL is the live policy's (external
 * servers, or the ones rlx train spawns). */
export function runView(config: RawConfig): RunView {
  const inf = config.inference;
  const urls = inf.base_urls.length
    ? inf.base_urls
    : Array.from({ length: inf.servers }, (_, i) => `http://${inf.host}:${inf.port + i}/v1`);
  const policy = new Set(urls.map(normalizeUrl));
  return { isPolicyUrl: (url) => policy.has(normalizeUrl(url)) };
}

/** An env's rl loss: its algo block's, else the run's; none where a built-in's action tokens are not rl. */
function envLoss(algo: AlgoConfig, config: RawConfig): RlLoss | undefined {
  if (algo.type !== "custom" && BUILTIN_ALGORITHMS[algo.type].actionLossType !== "rl") return undefined;
  return algo.loss ? resolveLoss(algo.loss, config.orchestrator.max_tokens) : runLoss(config);
}

/** A built-in's rules now; a custom file must exist now, its class is checked when it loads. */
function checkAlgo(algo: AlgoConfig, site: AlgoSite, run: RunView): string[] {
  if (algo.type !== "custom") return checkAlgorithm(BUILTIN_ALGORITHMS[algo.type], algo, site, run);
  checkPluginFile(algo.path, keySite(site, "path"));
  return [];
}

/** Distillation's temperature rule (src/algorithms/distill.ts) for a built-in algorithm, at the key
 * that set the env's temperature; a custom class's action loss is known only once it loads. */
function checkTemperature(algo: AlgoConfig, temperature: { value: number; path: (string | number)[] }, source: string) {
  if (algo.type === "custom") return;
  const cls: AlgorithmClass = BUILTIN_ALGORITHMS[algo.type];
  const broken = distillTemperatureRule(algo.type, new cls(algo).actionLoss, temperature.value);
  if (broken) throw new ConfigError(`${source}: ${keyPath(temperature.path)}: ${broken.message}`, { fix: broken.fix });
}

/** A built-in sampler's rule now; a custom file must exist now, its class is checked when it loads. */
function checkSamplerBlock(sampler: SamplerConfig, site: PluginSite, orch: RawConfig["orchestrator"]): void {
  if (sampler.type !== "custom") {
    const run = { batchSize: orch.batch_size, maxOffPolicySteps: orch.max_off_policy_steps };
    return checkSampler(BUILTIN_SAMPLERS[sampler.type], sampler, site, run);
  }
  checkPluginFile(sampler.path, keySite(site, "path"));
}

/** shard = "optimizer" shards AdamW state of full fine-tuning (LoRA adapters' is a few MB);
 * context_parallel ranks make one replica, so they divide the world. */
function checkShard(config: RawConfig, source: string): void {
  if (config.trainer.shard === "optimizer" && config.model.lora)
    throw new ConfigError(`${source}: trainer.shard: "optimizer" shards the AdamW state of full fine-tuning`, {
      fix: 'with [model.lora] use shard = "full" (the frozen base is sliced, the adapters stay whole) or "none"',
    });
  if (config.trainer.shard === "full" && config.model.lora?.merged)
    throw new ConfigError(
      `${source}: model.lora.merged: a trainer sharded "full" has no whole base weights to merge into`,
      {
        fix: 'set trainer.shard = "none" to publish merged weights, or drop merged (the adapters are published)',
      },
    );
  const { world_size: world, context_parallel: split } = config.trainer;
  if (world % split !== 0)
    throw new ConfigError(
      `${source}: trainer.context_parallel: ${split} does not divide trainer.world_size ${world} ` +
        "(each data-parallel replica is context_parallel ranks)",
      { fix: `set trainer.world_size to a multiple of ${split}, or context_parallel to a divisor of ${world}` },
    );
}

/** What `deterministic = true` needs: no step overlaps another, the trainer on the CPU and the
 * policy in rlx train's process. Any world size (Gloo sums two ranks' gradients in a fixed order)
 * and any fixed trainer.threads (0: one). */
function checkDeterministic(config: RawConfig, source: string): void {
  if (!config.deterministic) return;
  const fix = "set deterministic = false, or change the key as the error says";
  const need = (ok: boolean, key: string, why: string) => {
    if (!ok) throw new ConfigError(`${source}: ${key}: deterministic = true needs ${why}`, { fix });
  };
  need(
    config.orchestrator.max_async_level === 0,
    "orchestrator.max_async_level",
    "0 (with overlap, which weights sample a rollout depends on timing; such a run is replayable instead: rlx replay --rollouts)",
  );
  need(config.trainer.device === "cpu", "trainer.device", '"cpu"');
  need(
    config.inference.base_urls.length === 0,
    "inference.base_urls",
    "no external servers (the policy runs in rlx train's own process)",
  );
}

/** Each role's block: a frozen role never trains, a role's own algo is parsed and checked like an env's. */
function resolveRoles(
  roles: EnvEntry["roles"],
  site: { source: string; path: (string | number)[] },
  env: string,
  groupSize: number,
  run: RunView,
  warnings: string[],
): Record<string, ResolvedRole> {
  const out: Record<string, ResolvedRole> = {};
  for (const [role, block] of Object.entries(roles)) {
    const path = [...site.path, role];
    const frozen = block.source !== "policy";
    if (frozen && block.train)
      throw new ConfigError(
        `${site.source}: ${keyPath([...path, "train"])}: role "${role}" is played by the frozen model "${(block.source as FrozenModel).name}", whose tokens never train`,
        { fix: 'remove train (a frozen role is an opponent or a helper), or set source = "policy"' },
      );
    const algo = block.algo && parseAlgoConfig(block.algo, { source: site.source, path: [...path, "algo"] });
    if (algo?.loss)
      throw new ConfigError(
        `${site.source}: ${keyPath([...path, "algo", "loss"])}: a role's samples train with its env's rl loss`,
        { fix: "move loss to the env's algo block (orchestrator.train.env[i].algo.loss), or remove it" },
      );
    if (algo)
      warnings.push(
        ...checkAlgo(algo, { source: site.source, path: [...path, "algo"], env: { path, name: env, groupSize } }, run),
      );
    out[role] = { source: block.source, train: block.train ?? !frozen, ...(algo ? { algo } : {}) };
  }
  return out;
}

/** vLLM and SGLang are started by the user (docs/engines.md); rlx train spawns only its own servers. */
function checkEngine(config: RawConfig, source: string): void {
  const inf = config.inference;
  if (inf.engine !== "rlx" && inf.base_urls.length === 0)
    throw new ConfigError(`${source}: inference.engine = "${inf.engine}" needs inference.base_urls`, {
      fix: `start ${inf.engine === "vllm" ? "vLLM" : "SGLang"} as docs/engines.md says and list its URLs (ending in /v1) in inference.base_urls`,
    });
  if (inf.engine !== "rlx" && config.model.lora && !config.model.lora.merged)
    throw new ConfigError(
      `${source}: inference.engine = "${inf.engine}" reloads full weights, and [model.lora] publishes adapters`,
      {
        fix: "set model.lora.merged = true (each published step then also holds merged/, which the engine loads)",
      },
    );
}

/** What weight_transfer = "c10d" carries today (docs/engines.md, "Weights in memory"). */
function checkWeightTransfer(config: RawConfig, source: string): void {
  const inf = config.inference;
  if (inf.weight_transfer !== "c10d") return;
  if (inf.engine === "vllm")
    throw new ConfigError(
      `${source}: inference.weight_transfer = "c10d" reaches rlx policies and SGLang, and inference.engine is "vllm" (its NCCL weight transfer is not implemented)`,
      { fix: 'set inference.weight_transfer = "disk" (vLLM then loads each published step)' },
    );
  if (inf.engine === "sglang" && config.model.lora)
    throw new ConfigError(
      `${source}: inference.weight_transfer = "c10d" with SGLang broadcasts full weights, and [model.lora] trains adapters`,
      { fix: 'set inference.weight_transfer = "disk" (SGLang then loads each step\'s merged/)' },
    );
  if (inf.engine === "sglang" && (inf.transfer_delta !== "none" || inf.lost_server !== "stop"))
    throw new ConfigError(
      `${source}: inference.transfer_delta and lost_server = "continue" are rlx serve's; SGLang's update protocol sends every tensor and one failure stops the run`,
      { fix: 'drop inference.transfer_delta and inference.lost_server with engine = "sglang"' },
    );
  if (inf.transfer_delta === "tensors" && config.trainer.shard === "full" && !config.model.lora)
    throw new ConfigError(
      `${source}: inference.transfer_delta = "tensors" compares whole tensors, and trainer.shard = "full" holds slices`,
      { fix: 'set inference.transfer_delta = "none" (or trainer.shard = "none" or "optimizer")' },
    );
}

const withLoss = (loss: RlLoss | undefined) => (loss ? { loss } : {});

export function resolveConfig(config: RawConfig, source: string): Resolution {
  const warnings: string[] = [];
  const orch = config.orchestrator;
  checkDeterministic(config, source);
  checkWeightTransfer(config, source);
  checkShard(config, source);
  checkEngine(config, source);
  const inf = config.inference;
  if (inf.weight_transfer === "c10d" && inf.lost_server === "continue" && inf.transfer_timeout_s > 60)
    warnings.push(
      `${source}: inference.lost_server = "continue" with transfer_timeout_s = ${inf.transfer_timeout_s}: a server that dies can hold the trainer's send up that long (seen in Gloo when it died just before a transfer, docs/engines.md); consider transfer_timeout_s = 30`,
    );
  const run = runView(config);
  const defaultAlgo = parseAlgoConfig(orch.algo, { source, path: ["orchestrator", "algo"] });
  const defaultSampler = parseSamplerConfig(orch.sampler, { source, path: ["orchestrator", "sampler"] });
  if (orch.batch_size % orch.group_size !== 0) {
    throw new ConfigError(
      `${source}: orchestrator.batch_size: ${orch.batch_size} is not a multiple of orchestrator.group_size ${orch.group_size}`,
      {
        fix: "a step holds whole groups; make batch_size a multiple of group_size",
      },
    );
  }
  const names = new Set<string>();
  const envs = orch.train.env.map((env, i): ResolvedEnv => {
    const path = ["orchestrator", "train", "env", i];
    const name = env.name ?? env.id;
    if (names.has(name))
      throw new ConfigError(
        `${source}: ${keyPath([...path, "name"])}: env name "${name}" is used twice; give each env a unique name`,
      );
    names.add(name);
    const algo = env.algo
      ? parseAlgoConfig(env.algo, { source, path: [...path, "algo"] })
      : structuredClone(defaultAlgo);
    const group_size = env.group_size ?? orch.group_size;
    const algoPath = env.algo ? [...path, "algo"] : ["orchestrator", "algo"];
    const temperature =
      env.temperature === undefined
        ? { value: orch.temperature, path: ["orchestrator", "temperature"] }
        : { value: env.temperature, path: [...path, "temperature"] };
    warnings.push(...checkAlgo(algo, { source, path: algoPath, env: { path, name, groupSize: group_size } }, run));
    const args = checkEnvArgs(env, source, path);
    if (env.ratio_steps !== undefined && env.ratio_end === undefined)
      throw new ConfigError(`${source}: ${keyPath([...path, "ratio_steps"])}: a schedule needs ratio_end`, {
        fix: "set ratio_end (the ratio at ratio_steps), or remove ratio_steps",
      });
    const samplerPath = env.sampler ? [...path, "sampler"] : ["orchestrator", "sampler"];
    const sampler = env.sampler
      ? parseSamplerConfig(env.sampler, { source, path: samplerPath })
      : structuredClone(defaultSampler);
    checkSamplerBlock(sampler, { source, path: samplerPath }, orch);
    const roles = resolveRoles(env.roles, { source, path: [...path, "roles"] }, name, group_size, run, warnings);
    for (const checked of [algo, ...Object.values(roles).map((role) => role.algo)])
      if (checked) checkTemperature(checked, temperature, source);
    return {
      ...env,
      roles,
      args,
      name,
      group_size,
      temperature: env.temperature ?? orch.temperature,
      max_tokens: env.max_tokens ?? orch.max_tokens,
      algo,
      sampler,
      ...withLoss(envLoss(algo, config)),
    };
  });
  if (envs.every((env) => env.ratio === 0 && !env.ratio_end))
    throw new ConfigError(`${source}: orchestrator.train.env: every env has ratio 0, so none is ever drawn`, {
      fix: "give the env whose groups start a step a positive ratio (ratio 0 is for an env drawn only when another env spawns its groups)",
    });
  const evalBlock = orch.eval && {
    ...orch.eval,
    env: orch.eval.env.map((env, i) => ({
      ...env,
      args: checkEnvArgs(env, source, ["orchestrator", "eval", "env", i]),
    })),
  };
  const resolved: ResolvedConfig = {
    ...config,
    orchestrator: { ...orch, eval: evalBlock, algo: defaultAlgo, sampler: defaultSampler, train: { env: envs } },
  };
  return { config: resolved, warnings };
}
