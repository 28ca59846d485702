// Per-environment algorithm resolution and the cross-field rules of DESIGN §5. Every train env
// ends with its own fully spelled-out algorithm (a deep copy of [orchestrator.algo] unless it sets
// `algo`), group size, temperature and token limit. Errors name the key path the user typed;
// rules that are legal but almost certainly a mistake become warnings.
import { existsSync } from "node:fs";
import { ConfigError } from "../errors.ts";
import { envArgsSchema, listEnvs } from "../envs/index.ts";
import { ALGO_TYPES, type AlgoConfig, type AlgoType, algoSchemas, algoTraits } from "./algo.ts";
import { configError, keyPath } from "./errors.ts";
import type { EnvEntry, RawConfig } from "./schema.ts";

export interface ResolvedEnv extends Omit<EnvEntry, "algo" | "name" | "group_size" | "temperature" | "max_tokens"> {
  name: string;
  group_size: number;
  temperature: number;
  max_tokens: number;
  algo: AlgoConfig;
}

export interface ResolvedConfig extends Omit<RawConfig, "orchestrator"> {
  orchestrator: Omit<RawConfig["orchestrator"], "train" | "algo"> & { algo: AlgoConfig; train: { env: ResolvedEnv[] } };
}

export interface Resolution {
  config: ResolvedConfig;
  warnings: string[];
}

function parseAlgo(block: Record<string, unknown>, path: (string | number)[], source: string): AlgoConfig {
  const type = block.type as string;
  if (!(ALGO_TYPES as string[]).includes(type)) {
    throw new ConfigError(`${source}: ${keyPath([...path, "type"])}: unknown algorithm type "${type}"; known types: ${ALGO_TYPES.join(", ")}`, {
      fix: 'pick a known type, or type = "custom" with path = "./my_algo.ts"',
    });
  }
  const result = algoSchemas[type as AlgoType].safeParse(structuredClone(block));
  if (!result.success) throw configError(result.error.issues, source, path);
  return result.data as AlgoConfig;
}

const normalizeUrl = (url: string) => url.replace(/\/+$/, "").replace("//localhost", "//127.0.0.1");

/** The base URLs of the live policy: external servers, or the ones rlx train spawns. */
function policyUrls(config: RawConfig): string[] {
  const inf = config.inference;
  if (inf.base_urls.length) return inf.base_urls.map(normalizeUrl);
  return Array.from({ length: inf.servers }, (_, i) => normalizeUrl(`http://${inf.host}:${inf.port + i}/v1`));
}

function checkAlgo(algo: AlgoConfig, path: (string | number)[], source: string, config: RawConfig): void {
  const at = (key: string) => `${source}: ${keyPath([...path, ...key.split(".")])}`;
  if (algo.type === "custom") {
    if (!existsSync(algo.path)) throw new ConfigError(`${at("path")}: no such file "${algo.path}"`, { fix: "paths are relative to the directory rlx runs in" });
    return;
  }
  const { loss } = algoTraits[algo.type];
  const frozen = algo.sampling.source !== "policy";
  if ((loss === "rl" || loss === "ref_kl") && frozen) {
    throw new ConfigError(
      `${at("sampling.source")}: ${algo.type} trains with the ${loss} loss, whose importance ratio needs the live policy's own sampling logprobs, so it must sample from "policy"`,
      { fix: 'remove sampling.source, or use type = "sft" to learn from a frozen model' },
    );
  }
  if (algo.type === "sft" && !frozen) {
    throw new ConfigError(`${at("sampling.source")}: sft needs a frozen model to sample rollouts from (it is "policy")`, {
      fix: 'set sampling.source = { name = "teacher", base_url = "http://127.0.0.1:8001/v1" }',
    });
  }
  if (algo.type === "opd" && policyUrls(config).includes(normalizeUrl(algo.teacher.base_url))) {
    throw new ConfigError(`${at("teacher.base_url")}: the teacher ${algo.teacher.base_url} is the live policy server; the distillation KL would be identically zero`, {
      fix: "point the teacher at a separate frozen server (rlx serve --model TEACHER_DIR --port 8001)",
    });
  }
}

function checkEnvArgs(env: Pick<EnvEntry, "id" | "args">, path: (string | number)[], source: string): EnvEntry["args"] {
  if (env.id.endsWith(".ts")) {
    if (!existsSync(env.id)) throw new ConfigError(`${source}: ${keyPath([...path, "id"])}: no such file "${env.id}"`);
    return env.args; // a custom env validates its own args when it loads
  }
  const schema = envArgsSchema(env.id);
  if (!schema) throw new ConfigError(`${source}: ${keyPath([...path, "id"])}: unknown environment "${env.id}"; built-in: ${listEnvs().join(", ")}`, { fix: "or give the path of a custom env's .ts file" });
  const result = schema.safeParse(env.args);
  if (!result.success) throw configError(result.error.issues, source, [...path, "args"]);
  return result.data as EnvEntry["args"];
}

/** What `deterministic = true` needs: no step overlaps another, and one CPU process computes each side. */
function checkDeterministic(config: RawConfig, source: string): void {
  if (!config.deterministic) return;
  const fix = "set deterministic = false, or change the key as the error says";
  const need = (ok: boolean, key: string, why: string) => {
    if (!ok) throw new ConfigError(`${source}: ${key}: deterministic = true needs ${why}`, { fix });
  };
  need(config.orchestrator.max_async_level === 0, "orchestrator.max_async_level", "0 (with overlap, which weights sample a rollout depends on timing)");
  need(config.trainer.device === "cpu", "trainer.device", '"cpu"');
  need(config.trainer.world_size === 1, "trainer.world_size", "1 (one trainer process on one thread)");
  need(config.trainer.threads <= 1, "trainer.threads", "0 or 1 (the trainer runs on one thread)");
  need(config.inference.base_urls.length === 0, "inference.base_urls", "no external servers (the policy runs in rlx train's own process)");
}

export function resolveConfig(config: RawConfig, source: string): Resolution {
  const warnings: string[] = [];
  const orch = config.orchestrator;
  checkDeterministic(config, source);
  const defaultAlgo = parseAlgo(orch.algo, ["orchestrator", "algo"], source);
  if (orch.batch_size % orch.group_size !== 0) {
    throw new ConfigError(`${source}: orchestrator.batch_size: ${orch.batch_size} is not a multiple of orchestrator.group_size ${orch.group_size}`, {
      fix: "a step holds whole groups; make batch_size a multiple of group_size",
    });
  }
  const names = new Set<string>();
  const envs = orch.train.env.map((env, i): ResolvedEnv => {
    const path = ["orchestrator", "train", "env", i];
    const name = env.name ?? env.id;
    if (names.has(name)) throw new ConfigError(`${source}: ${keyPath([...path, "name"])}: env name "${name}" is used twice; give each env a unique name`);
    names.add(name);
    const algo = env.algo ? parseAlgo(env.algo, [...path, "algo"], source) : structuredClone(defaultAlgo);
    checkAlgo(algo, env.algo ? [...path, "algo"] : ["orchestrator", "algo"], source, config);
    const group_size = env.group_size ?? orch.group_size;
    if (algo.type !== "custom" && algoTraits[algo.type].groupRelative && group_size === 1) {
      warnings.push(`${keyPath(path)} ("${name}"): ${algo.type} with group_size 1 gives every rollout advantage 0, so nothing trains; use group_size >= 2`);
    }
    const args = checkEnvArgs(env, path, source);
    return {
      ...env,
      args,
      name,
      group_size,
      temperature: env.temperature ?? orch.temperature,
      max_tokens: env.max_tokens ?? orch.max_tokens,
      algo,
    };
  });
  const evalBlock = orch.eval && { ...orch.eval, env: orch.eval.env.map((env, i) => ({ ...env, args: checkEnvArgs(env, ["orchestrator", "eval", "env", i], source) })) };
  const resolved: ResolvedConfig = { ...config, orchestrator: { ...orch, eval: evalBlock, algo: defaultAlgo, train: { env: envs } } };
  return { config: resolved, warnings };
}
