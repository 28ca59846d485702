// The task sampler registry: config `type` -> class, the config schema of every type, the rules every
// sampler block obeys, and the custom-sampler loader. Like the algorithm registry
// (src/algorithms/registry.ts): each built-in is one file and one line of BUILTIN_SAMPLERS, and
// src/config/resolve.ts asks this file to parse and check each env's sampler block.
//
// `type = "custom"` with `path = "./my_sampler.ts"` imports the user's file at run time; its
// default export receives the kit below and returns the class (docs/task_samplers.md;
// examples/samplers/least_seen.ts):
//
//   export default ({ Sampler, z }) =>
//     class LeastSeen extends Sampler { static type = "least_seen"; next(step) { ... } };
//
// The user's `schema` validates the block minus `type`, `path` and `pass_reward`, and errors name
// the path the user typed (orchestrator.train.env[1].sampler.window).
import { z } from "zod";
import { ConfigError, configError, keyPath } from "../errors.ts";
import { type FactoryKind, keySite, loadPlugin, type PluginSite } from "../plugin.ts";
import {
  hasSpread,
  passRewardField,
  Sampler,
  type SamplerClass,
  type SamplerContext,
  type SamplerRunView,
} from "./base.ts";
import { ReplayBuffer } from "./buffer.ts";
import { Curriculum, type CurriculumConfig } from "./curriculum.ts";
import { Filter, type FilterConfig } from "./filter.ts";
import { Replay, type ReplayConfig } from "./replay.ts";
import { Uniform, type UniformConfig } from "./uniform.ts";
import { nextRandom, ShuffledWalk } from "./walk.ts";

export const BUILTIN_SAMPLERS = {
  uniform: Uniform,
  filter: Filter,
  curriculum: Curriculum,
  replay: Replay,
} satisfies Record<string, SamplerClass>;

export type BuiltinSamplerType = keyof typeof BUILTIN_SAMPLERS;

const customSchema = z.looseObject({ type: z.literal("custom"), path: z.string().min(1), ...passRewardField });

/** A parsed sampler block: one built-in's config, or a custom one's (checked by its class at setup). */
export type SamplerConfig =
  UniformConfig | FilterConfig | CurriculumConfig | ReplayConfig | z.output<typeof customSchema>;

export const SAMPLER_TYPES = [...Object.keys(BUILTIN_SAMPLERS), "custom"];

/** What a custom sampler's factory receives. */
export const samplerKit = { Sampler, z, ShuffledWalk, ReplayBuffer, nextRandom, hasSpread };
export type SamplerKit = typeof samplerKit;

/** A custom sampler file, for the plugin loader: its factory gets the kit and returns a Sampler class. */
export const samplerPlugin: FactoryKind = {
  base: Sampler,
  kit: samplerKit,
  shape: "export default ({ Sampler }) => class extends Sampler { next(step) { ... } } (docs/task_samplers.md)",
};

/** Parses one sampler block by its `type` (built-ins whole; custom ones up to their own fields). */
export function parseSamplerConfig(block: Record<string, unknown>, site: PluginSite): SamplerConfig {
  const type = block.type as string;
  if (!SAMPLER_TYPES.includes(type)) {
    throw new ConfigError(
      `${site.source}: ${keyPath([...site.path, "type"])}: unknown sampler type "${type}"; known types: ${SAMPLER_TYPES.join(", ")}`,
      { fix: 'pick a known type, or type = "custom" with path = "./my_sampler.ts" (docs/task_samplers.md)' },
    );
  }
  const schema: z.ZodType = type === "custom" ? customSchema : BUILTIN_SAMPLERS[type as BuiltinSamplerType].schema;
  const result = schema.safeParse(structuredClone(block));
  if (!result.success) throw configError(result.error.issues, site.source, site.path, { schema });
  return result.data as SamplerConfig;
}

/** The class's own rule, as a ConfigError naming the key. */
export function checkSampler(cls: SamplerClass, config: SamplerConfig, site: PluginSite, run: SamplerRunView): void {
  const broken = cls.checkConfig(config, run);
  if (broken)
    throw new ConfigError(
      `${site.source}: ${keyPath([...site.path, ...broken.key.split(".")])}: ${broken.message}`,
      broken.fix ? { fix: broken.fix } : {},
    );
}

/** One sampler instance for one env: built-ins were checked at resolve; a custom class is loaded and checked here. */
export async function createSampler(
  config: SamplerConfig,
  ctx: SamplerContext,
  site: PluginSite,
  run: SamplerRunView,
): Promise<Sampler<any>> {
  if (config.type !== "custom") return new BUILTIN_SAMPLERS[config.type](config as any, ctx);
  const cls = (await loadPlugin(config.path, keySite(site, "path"), samplerPlugin)) as SamplerClass;
  const { type, path, pass_reward, ...own } = config;
  const parsed = cls.schema.safeParse(own);
  if (!parsed.success) throw configError(parsed.error.issues, site.source, site.path, { schema: cls.schema });
  const full = { ...(parsed.data as object), type, path, pass_reward };
  checkSampler(cls, full as SamplerConfig, site, run);
  return new cls(full, ctx);
}

/** The sampler's name in logs: the built-in type, or the custom class's type. */
export function samplerName(sampler: Sampler<any>): string {
  return sampler.kind.type || sampler.config.type;
}
