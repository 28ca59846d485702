// The algorithm registry: config `type` -> class, and the loader of user algorithms.
//
// `type = "custom"` with `path = "./my_algo.ts"` imports the user's file at run time (a compiled
// rlx binary imports .ts files from disk). The file must not need rlx's sources, so rlx hands
// everything over: its default export is a function that receives the kit below and returns the
// class (docs/algorithms.md; examples/algorithms/rloo.ts):
//
//   export default ({ Algorithm, z, group, assignAdvantage }) =>
//     class Rloo extends Algorithm { static type = "rloo"; static schema = z.strictObject({}); ... };
//
// The user's `schema` validates the config block minus `type`, `path` and `sampling` (which every
// algorithm shares and rlx validates), and errors name the path the user typed
// (orchestrator.train.env[1].algo.decay). DESIGN §5's rules apply as to built-ins.
import { resolve } from "node:path";
import { z } from "zod";
import type { AlgoConfig, AlgoType } from "../config/algo.ts";
import type { ResolvedConfig } from "../config/resolve.ts";
import { configError, keyPath } from "../config/errors.ts";
import { ConfigError } from "../errors.ts";
import { perToken, rolloutLength, sampleRanges } from "../data/types.ts";
import { Algorithm, type AlgorithmClass } from "./base.ts";
import { Echo } from "./echo.ts";
import * as group from "./group.ts";
import { Grpo } from "./grpo.ts";
import { MaxRl } from "./max_rl.ts";
import { Opd } from "./opd.ts";
import { Opsd } from "./opsd.ts";
import { actionMask, assignAdvantage, assignRefLogprobs, sampleSequences } from "./routing.ts";
import { Sft } from "./sft.ts";

export const BUILTIN_ALGORITHMS: Record<Exclude<AlgoType, "custom">, AlgorithmClass> = {
  grpo: Grpo,
  max_rl: MaxRl,
  opd: Opd,
  opsd: Opsd,
  sft: Sft,
  echo: Echo,
};

/** What a custom algorithm's factory receives. */
export const algorithmKit = {
  Algorithm,
  z,
  group,
  assignAdvantage,
  assignRefLogprobs,
  actionMask,
  sampleSequences,
  perToken,
  sampleRanges,
  rolloutLength,
};
export type AlgorithmKit = typeof algorithmKit;

/** Where an algo block sits, for error messages: the config file and the key path. */
export interface AlgoSite {
  source: string;
  path: (string | number)[];
  /** The env's group size (for the group_size = 1 warning). */
  groupSize?: number;
}

const LOSS_COMPONENTS = ["rl", "ce", "ref_kl"];

/** Imports a custom algorithm file and returns its class. */
export async function loadCustomClass(file: string, site: AlgoSite): Promise<AlgorithmClass> {
  const at = `${site.source}: ${keyPath([...site.path, "path"])}`;
  const shape = "export default ({ Algorithm }) => class extends Algorithm { ... } (docs/algorithms.md)";
  let module: { default?: unknown };
  try {
    module = await import(resolve(file));
  } catch (err) {
    throw new ConfigError(`${at}: cannot import "${file}": ${(err as Error).message}`, { fix: "paths are relative to the directory rlx runs in" });
  }
  if (typeof module.default !== "function") throw new ConfigError(`${at}: "${file}" has no default export function`, { fix: shape });
  let cls: unknown;
  try {
    cls = (module.default as (kit: AlgorithmKit) => unknown)(algorithmKit);
  } catch (err) {
    throw new ConfigError(`${at}: the default export of "${file}" threw: ${(err as Error).message}`, { fix: shape });
  }
  if (typeof cls !== "function" || !(cls.prototype instanceof Algorithm)) {
    throw new ConfigError(`${at}: the default export of "${file}" must return a class extending the Algorithm it is given`, { fix: shape });
  }
  const algo = cls as AlgorithmClass;
  if (!LOSS_COMPONENTS.includes(algo.actionLossType)) {
    throw new ConfigError(`${at}: ${algo.name}.actionLossType is "${algo.actionLossType}"; it must be one of ${LOSS_COMPONENTS.join(", ")}`);
  }
  return algo;
}

/** The DESIGN §5 rule every algorithm obeys: rl and ref_kl need the live policy's own logprobs. */
function checkSamplingSource(cls: AlgorithmClass, config: AlgoConfig, site: AlgoSite): void {
  if (cls.actionLossType === "ce" || config.sampling.source === "policy") return;
  throw new ConfigError(
    `${site.source}: ${keyPath([...site.path, "sampling", "source"])}: ${cls.type || config.type} trains with the ${cls.actionLossType} loss, whose importance ratio needs the live policy's own sampling logprobs, so it must sample from "policy"`,
    { fix: 'remove sampling.source, or use type = "sft" to learn from a frozen model' },
  );
}

/**
 * One algorithm instance for one env, from its resolved config block (built-ins are already
 * validated by src/config/resolve.ts; custom classes are loaded and validated here).
 */
export async function createAlgorithm(config: AlgoConfig, site: AlgoSite): Promise<{ algorithm: Algorithm<any>; warnings: string[] }> {
  const warnings: string[] = [];
  let cls: AlgorithmClass;
  let full: Record<string, unknown> = config;
  if (config.type === "custom") {
    cls = await loadCustomClass(config.path, site);
    const { type, path, sampling, ...own } = config;
    const parsed = cls.schema.safeParse(own);
    if (!parsed.success) throw configError(parsed.error.issues, site.source, site.path);
    full = { ...(parsed.data as object), type, path, sampling };
  } else {
    cls = BUILTIN_ALGORITHMS[config.type];
  }
  checkSamplingSource(cls, config, site);
  if (cls.groupRelative && site.groupSize === 1) {
    warnings.push(`${keyPath(site.path)}: ${cls.type} is group-relative and group_size is 1, so every advantage is 0 and nothing trains; use group_size >= 2`);
  }
  return { algorithm: new cls(full), warnings };
}

/** The algorithm's name in logs and audit records: the built-in type, or the custom class's type. */
export function algorithmName(algorithm: Algorithm<any>): string {
  return algorithm.kind.type || algorithm.config.type;
}

/** One algorithm instance per train env (instances hold per-env state), keyed by env name. */
export async function createEnvAlgorithms(config: ResolvedConfig, source: string): Promise<{ algorithms: Map<string, Algorithm<any>>; warnings: string[] }> {
  const algorithms = new Map<string, Algorithm<any>>();
  const warnings: string[] = [];
  for (const [i, env] of config.orchestrator.train.env.entries()) {
    const site = { source, path: ["orchestrator", "train", "env", i, "algo"], groupSize: env.group_size };
    const created = await createAlgorithm(env.algo, site);
    algorithms.set(env.name, created.algorithm);
    // built-ins were already warned about by the config resolution
    if (env.algo.type === "custom") warnings.push(...created.warnings);
  }
  return { algorithms, warnings };
}
