// The environment registry: built-in envs by id, custom envs from a `.ts`/`.js` file path
// (`id = "./my_env.ts"` in `[[orchestrator.train.env]]`), through the plugin loader that custom
// algorithms, samplers and judges use (src/plugin.ts), so its errors read the same, and env servers
// by URL (`id = "http://127.0.0.1:8765"`, remote/).
// A custom env file default-exports an EnvDefinition object (see types.ts), or a function of envKit
// ({ z }) returning one; nothing from rlx's sources or any package needs to be importable from it,
// which is what lets a compiled binary load it; without an `args` schema the env receives its args
// table as written.
import { type ZodType, z } from "zod";
import { ConfigError, configError, keyPath } from "../errors.ts";
import { checkPluginFile, loadPlugin, type ObjectKind, type PluginSite, siteText } from "../plugin.ts";
import calc from "./calc/index.ts";
import forth from "./forth/index.ts";
import math from "./math/index.ts";
import nim from "./nim/index.ts";
import proposer from "./proposer/index.ts";
import recall from "./recall/index.ts";
import search from "./search/index.ts";
import { DEFAULT_REMOTE, isEnvUrl, loadRemoteEnv, type RemoteSettings } from "./remote/index.ts";
import type { Env, EnvDefinition } from "./types.ts";

export { DEFAULT_REMOTE, isEnvUrl, remoteBlock, remoteSettings, type RemoteSettings } from "./remote/index.ts";

const BUILT_IN: Record<string, EnvDefinition> = { math, calc, forth, search, nim, proposer, recall };

/** Ids of the built-in envs. */
export function listEnvs(): string[] {
  return Object.keys(BUILT_IN);
}

/** The built-in env definitions (for `rlx env list`). */
export function envDefinitions(): EnvDefinition[] {
  return Object.values(BUILT_IN);
}

/** The args schema of a built-in env (custom envs are only known once loaded). */
export function envArgsSchema(id: string): ZodType | undefined {
  return BUILT_IN[id]?.args;
}

/** Whether an env id is a file path (a custom env) rather than a built-in's name or a server's URL. */
export function isEnvPath(idOrPath: string): boolean {
  return !isEnvUrl(idOrPath) && (/\.(ts|js|mjs|mts)$/.test(idOrPath) || idOrPath.includes("/"));
}

/**
 * A config entry's env args, validated now against a built-in's schema (defaults filled in), so a
 * typo fails before anything runs; a custom env file must exist, and checks its args when it
 * loads. Errors name the config file and the entry's key path.
 */
export function checkEnvArgs(
  env: { id: string; args: Record<string, unknown> },
  source: string,
  path: readonly (string | number)[],
): Record<string, unknown> {
  if (isEnvUrl(env.id)) return env.args; // the server checks them, once it is reached
  if (isEnvPath(env.id)) {
    checkPluginFile(env.id, { source, path: [...path, "id"] });
    return env.args;
  }
  const schema = envArgsSchema(env.id);
  if (!schema)
    throw new ConfigError(
      `${source}: ${keyPath([...path, "id"])}: unknown environment "${env.id}"; built-in: ${listEnvs().join(", ")}`,
      { fix: "or give the path of a custom env's .ts file" },
    );
  return parseEnvArgs(schema, env.args, source, [...path, "args"]);
}

/** An args table parsed by an env's schema (defaults filled in); one that does not fit is a
 * ConfigError naming each key under `path` in `source`, with the keys the schema has there. */
export function parseEnvArgs(
  schema: ZodType,
  args: unknown,
  source: string,
  path: readonly (string | number)[],
  fix?: string,
): Record<string, unknown> {
  const parsed = schema.safeParse(args);
  if (!parsed.success) throw configError(parsed.error.issues, source, path, { schema, ...(fix ? { fix } : {}) });
  return parsed.data as Record<string, unknown>;
}

/** What a custom env file's default export receives when it is a function: zod, for its args schema. */
export const envKit = { z };
export type EnvKit = typeof envKit;

/** A custom env file, for the plugin loader: an EnvDefinition object (types.ts), or a function of
 * envKit returning one, checked as it loads. */
export const envPlugin: ObjectKind<EnvDefinition> = {
  kit: envKit,
  schema: z.looseObject({
    id: z.string().min(1),
    description: z.string(),
    args: z
      .custom<ZodType>((v) => typeof (v as ZodType | undefined)?.safeParse === "function", "must be a zod schema")
      .optional(),
    create: z.custom<EnvDefinition["create"]>(
      (v) => typeof v === "function",
      "must be a function: create(args) returns the env",
    ),
  }),
  shape:
    "export default ({ z }) => ({ id, description, args: z.strictObject({...}), create(args) { return { tools, maxTurns, load, reward } } })",
};

/** A built-in env by id, a custom env from a file path (relative to the working directory), or an
 * env server by URL (`remote`: its entry's settings); `site` is the key that names it, for errors
 * (none on the command line). */
export async function loadEnv(
  idOrPath: string,
  site: PluginSite = { source: "env", path: [] },
  remote: RemoteSettings = DEFAULT_REMOTE,
): Promise<EnvDefinition> {
  const builtIn = BUILT_IN[idOrPath];
  if (builtIn) return builtIn;
  if (isEnvUrl(idOrPath)) return loadRemoteEnv(idOrPath, remote, siteText(site));
  if (!isEnvPath(idOrPath)) {
    throw new ConfigError(`${siteText(site)}: unknown env "${idOrPath}"`, {
      fix: `use one of ${Object.keys(BUILT_IN).join(", ")}, a path to a .ts file that default-exports an env, or an env server's URL`,
    });
  }
  return loadPlugin(idOrPath, site, envPlugin);
}

/** Validates `args` against the env's schema (defaults filled in) and creates the env; `site` is
 * where the args table was given, `ref` how the user names the env (a custom env's path), for errors. */
export async function createEnv(
  definition: EnvDefinition,
  args: unknown = {},
  site: PluginSite = { source: `env ${definition.id}`, path: ["args"] },
  ref = definition.id,
): Promise<Env> {
  if (!definition.args) return definition.create(args ?? {});
  const fix = `use the keys listed; \`rlx env show ${ref} --args '{...}'\` tries args without a model`;
  return definition.create(parseEnvArgs(definition.args, args ?? {}, site.source, site.path, fix));
}
