// The algorithm registry: config `type` -> class, the config schema of every type, and the rules
// every algorithm's config obeys. Each built-in algorithm is one file (its class, its schema, its
// traits as the class's statics) and one line of BUILTIN_ALGORITHMS; src/config/resolve.ts asks
// this file to parse and check each env's algo block, so nothing about an algorithm lives anywhere
// else (docs/algorithms.md, "Adding a built-in algorithm").
//
// `type = "custom"` with `path = "./my_algo.ts"` imports the user's file at run time (a compiled
// rlx binary imports .ts files from disk). The file must not need rlx's sources, so rlx hands
// everything over: its default export is a function that receives the kit below and returns the
// class (docs/algorithms.md; examples/algorithms/rloo.ts):
//
//   export default ({ Algorithm, z, group, assignAdvantage }) =>
//     class Rloo extends Algorithm { static type = "rloo"; static schema = z.strictObject({}); ... };
//
// The user's `schema` validates the config block minus `type`, `path`, `sampling` and `loss` (which
// every algorithm shares and rlx validates), and errors name the path the user typed
// (orchestrator.train.env[1].algo.decay). The rules below apply to custom classes as to built-ins,
// once their class is loaded (at setup).
import { z } from "zod";
import { perToken, rolloutLength, sampleRanges } from "../data/types.ts";
import { ConfigError, configError, keyPath } from "../errors.ts";
import { type FactoryKind, keySite, loadPlugin, type PluginSite, siteText } from "../plugin.ts";
import { judgeKit } from "../judges/index.ts";
import { AgenticCredit, creditFactors, parseStepWeights, spreadCredit } from "./agentic_credit.ts";
import { Algorithm, type AlgorithmClass, LOSS_COMPONENTS, type RunView } from "./base.ts";
import { byBatch, byKey, byTask } from "./barriers.ts";
import { Echo } from "./echo.ts";
import * as group from "./group.ts";
import { Grpo } from "./grpo.ts";
import { HierarchicalGrpo } from "./hierarchical_grpo.ts";
import { MaxRl } from "./max_rl.ts";
import { Opd } from "./opd.ts";
import { Opsd } from "./opsd.ts";
import { Rae } from "./rae.ts";
import { ReinforcePp } from "./reinforce_pp.ts";
import { Rloo } from "./rloo.ts";
import {
  actionMask,
  assignAdvantage,
  assignDistillTargets,
  assignRefLogprobs,
  creditParts,
  sampleSequences,
} from "./routing.ts";
import { checkLossBlock, type LossConfig, parseLossBlock } from "./loss_schema.ts";
import { samplingSchema } from "./schemas.ts";
import { Sft } from "./sft.ts";

export const BUILTIN_ALGORITHMS = {
  grpo: Grpo,
  max_rl: MaxRl,
  opd: Opd,
  opsd: Opsd,
  sft: Sft,
  echo: Echo,
  agentic_credit: AgenticCredit,
  rae: Rae,
  hierarchical_grpo: HierarchicalGrpo,
  rloo: Rloo,
  reinforce_pp: ReinforcePp,
} satisfies Record<string, AlgorithmClass>;

type Builtins = typeof BUILTIN_ALGORITHMS;

/** A user's algorithm class from a .ts file; its own schema validates the rest when it loads. */
const customSchema = z.looseObject({ type: z.literal("custom"), path: z.string().min(1), sampling: samplingSchema });

export type BuiltinType = keyof Builtins;
export type AlgoType = BuiltinType | "custom";
/** A parsed algo block: one built-in's config, or a custom one's (checked by its class at setup),
 * with the rl loss it names, if any (every type may; only those whose action tokens go to rl use it). */
export type AlgoConfig = (
  { [K in BuiltinType]: z.output<Builtins[K]["schema"]> }[BuiltinType] | z.output<typeof customSchema>
) & { loss?: LossConfig };

export const ALGO_TYPES = [...Object.keys(BUILTIN_ALGORITHMS), "custom"] as AlgoType[];

/** The built-in types whose credit is relative to the group (they need group_size >= 2). */
export function groupRelativeTypes(): BuiltinType[] {
  return (Object.keys(BUILTIN_ALGORITHMS) as BuiltinType[]).filter((type) => BUILTIN_ALGORITHMS[type].groupRelative);
}

/** What a custom algorithm's factory receives. */
export const algorithmKit = {
  Algorithm,
  z,
  group,
  assignAdvantage,
  assignRefLogprobs,
  assignDistillTargets,
  actionMask,
  sampleSequences,
  perToken,
  sampleRanges,
  rolloutLength,
  /** Barrier specs beyond rollout and group (docs/algorithms.md, "Barriers"). */
  barriers: { byTask, byKey, byBatch },
  /** Credit assignment by a judge (ctx.connectJudge): the parts of a rollout, the STEP-line parser,
   * the factors, and agentic_credit's spreading of an advantage over the parts by their weights. */
  credit: { creditParts, parseStepWeights, creditFactors, spreadCredit },
  /** A judge's view of a rollout and its errors (src/judges/): messageText, taskText, JudgeError, ... */
  judges: judgeKit,
};
export type AlgorithmKit = typeof algorithmKit;

/** A custom algorithm file, for the plugin loader: its factory gets the kit and returns an Algorithm class. */
export const algorithmPlugin: FactoryKind = {
  base: Algorithm,
  kit: algorithmKit,
  shape: "export default ({ Algorithm }) => class extends Algorithm { ... } (docs/algorithms.md)",
};

/** Where an algo block sits, for error messages: the config file and the block's key path. */
export interface AlgoSite extends PluginSite {
  /** The train env the block serves (its entry's key path, name and group size), for the group_size = 1 warning. */
  env?: { path: (string | number)[]; name: string; groupSize: number };
}

/** Parses one algo block by its `type` (built-ins whole; custom ones up to their own fields); its
 * `loss`, which every type may name, by the loss schema the run's [trainer.loss] has. */
export function parseAlgoConfig(block: Record<string, unknown>, site: AlgoSite): AlgoConfig {
  const type = block.type as string;
  if (!(ALGO_TYPES as string[]).includes(type)) {
    throw new ConfigError(
      `${site.source}: ${keyPath([...site.path, "type"])}: unknown algorithm type "${type}"; known types: ${ALGO_TYPES.join(", ")}`,
      {
        fix: 'pick a known type, or type = "custom" with path = "./my_algo.ts"',
      },
    );
  }
  const { loss, ...own } = structuredClone(block);
  const schema: z.ZodType = type === "custom" ? customSchema : BUILTIN_ALGORITHMS[type as BuiltinType].schema;
  const result = schema.safeParse(own);
  if (!result.success) throw configError(result.error.issues, site.source, site.path, { schema });
  if (loss === undefined) return result.data as AlgoConfig;
  return { ...(result.data as AlgoConfig), loss: parseLossBlock(loss, site.source, [...site.path, "loss"]) };
}

/**
 * The rules every algorithm's config obeys (docs/architecture.md, the algorithms layer), in one
 * place: rl and ref_kl need the live policy's own logprobs (so its own samples), `loss` only where
 * the action tokens go to the rl component, the class's own rule (checkConfig), and the group_size
 * 1 warning for group-relative credit. Returns warnings.
 */
export function checkAlgorithm(cls: AlgorithmClass, config: AlgoConfig, site: AlgoSite, run: RunView): string[] {
  const at = (key: string) => `${site.source}: ${keyPath([...site.path, ...key.split(".")])}`;
  const name = cls.type || config.type;
  if (config.loss) checkLossBlock(name, new cls(config).actionLoss, at("loss"));
  if (cls.actionLossType !== "ce" && config.sampling.source !== "policy") {
    throw new ConfigError(
      `${at("sampling.source")}: ${name} trains with the ${cls.actionLossType} loss, whose importance ratio needs the live policy's own sampling logprobs, so it must sample from "policy"`,
      { fix: 'remove sampling.source, or use type = "sft" to learn from a frozen model' },
    );
  }
  const broken = cls.checkConfig(config, run);
  if (broken) throw new ConfigError(`${at(broken.key)}: ${broken.message}`, broken.fix ? { fix: broken.fix } : {});
  if (!cls.groupRelative || site.env?.groupSize !== 1) return [];
  return [
    `${keyPath(site.env.path)} ("${site.env.name}"): ${name} with group_size 1 gives every rollout advantage 0, so nothing trains; use group_size >= 2`,
  ];
}

/** Imports a custom algorithm file and returns its class. */
export async function loadCustomClass(file: string, site: AlgoSite): Promise<AlgorithmClass> {
  const at = keySite(site, "path");
  const algo = (await loadPlugin(file, at, algorithmPlugin)) as AlgorithmClass;
  if (!LOSS_COMPONENTS.includes(algo.actionLossType)) {
    throw new ConfigError(
      `${siteText(at)}: ${algo.name}.actionLossType is "${algo.actionLossType}"; it must be one of ${LOSS_COMPONENTS.join(", ")}`,
    );
  }
  return algo;
}

/**
 * One algorithm instance for one env from its parsed block. Built-ins were checked when the config
 * was resolved; a custom class is loaded here, validates its own fields, and gets the same checks.
 */
export async function createAlgorithm(
  config: AlgoConfig,
  site: AlgoSite,
  run: RunView,
): Promise<{ algorithm: Algorithm<any>; warnings: string[] }> {
  if (config.type !== "custom") {
    const cls: AlgorithmClass = BUILTIN_ALGORITHMS[config.type];
    return { algorithm: new cls(config), warnings: [] };
  }
  const cls = await loadCustomClass(config.path, site);
  const { type, path, sampling, loss, ...own } = config;
  const parsed = cls.schema.safeParse(own);
  if (!parsed.success) throw configError(parsed.error.issues, site.source, site.path, { schema: cls.schema });
  const full = { ...(parsed.data as object), type, path, sampling, ...(loss ? { loss } : {}) };
  const warnings = checkAlgorithm(cls, full as AlgoConfig, site, run);
  return { algorithm: new cls(full), warnings };
}

/** The algorithm's name in logs and audit records: the built-in type, or the custom class's type. */
export function algorithmName(algorithm: Algorithm<any>): string {
  return algorithm.kind.type || algorithm.config.type;
}
