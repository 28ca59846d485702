// The environment registry: built-in envs by id, and custom envs from a `.ts`/`.js` file path
// (`id = "./my_env.ts"` in `[[orchestrator.train.env]]`), the same way custom algorithms load.
// A custom env file default-exports a plain EnvDefinition object (see types.ts); nothing from
// rlx's sources (or zod) needs to be importable from it, which is what lets a compiled binary load
// it; without an `args` schema the env receives its args table as written.
import { isAbsolute, resolve } from "node:path";
import type { ZodType } from "zod";
import { existsSync } from "node:fs";
import { ConfigError, configError, EnvError, keyPath } from "../errors.ts";
import forth from "./forth/index.ts";
import math from "./math/index.ts";
import nim from "./nim/index.ts";
import proposer from "./proposer/index.ts";
import search from "./search/index.ts";
import type { Env, EnvDefinition } from "./types.ts";

const BUILT_IN: Record<string, EnvDefinition> = { math, forth, search, nim, proposer };

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

/** Whether an env id is a file path (a custom env) rather than a built-in's name. */
export function isEnvPath(idOrPath: string): boolean {
  return /\.(ts|js|mjs|mts)$/.test(idOrPath) || idOrPath.includes("/");
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
  if (isEnvPath(env.id)) {
    if (!existsSync(env.id)) throw new ConfigError(`${source}: ${keyPath([...path, "id"])}: no such file "${env.id}"`);
    return env.args;
  }
  const schema = envArgsSchema(env.id);
  if (!schema)
    throw new ConfigError(
      `${source}: ${keyPath([...path, "id"])}: unknown environment "${env.id}"; built-in: ${listEnvs().join(", ")}`,
      { fix: "or give the path of a custom env's .ts file" },
    );
  const result = schema.safeParse(env.args);
  if (!result.success) throw configError(result.error.issues, source, [...path, "args"]);
  return result.data as Record<string, unknown>;
}

function checkDefinition(value: unknown, path: string): EnvDefinition {
  const d = value as Partial<EnvDefinition> | undefined;
  const problems: string[] = [];
  if (!d || typeof d !== "object") problems.push("no default export object");
  else {
    if (typeof d.id !== "string" || !d.id) problems.push("`id` must be a non-empty string");
    if (typeof d.description !== "string") problems.push("`description` must be a string");
    if (d.args !== undefined && typeof (d.args as ZodType).safeParse !== "function")
      problems.push("`args`, when given, must be a zod schema");
    if (typeof d.create !== "function") problems.push("`create(args)` must be a function");
  }
  if (problems.length > 0) {
    throw new EnvError(`custom env ${path}: ${problems.join("; ")}`, {
      fix: "default-export { id, description, args: z.strictObject({...}), create(args) { return { tools, maxTurns, load, reward } } }",
    });
  }
  return d as EnvDefinition;
}

/** A built-in env by id, or a custom env from a file path (relative to the working directory). */
export async function loadEnv(idOrPath: string): Promise<EnvDefinition> {
  const builtIn = BUILT_IN[idOrPath];
  if (builtIn) return builtIn;
  if (!isEnvPath(idOrPath)) {
    throw new ConfigError(`unknown env "${idOrPath}"`, {
      fix: `use one of ${Object.keys(BUILT_IN).join(", ")}, or a path to a .ts file that default-exports an env`,
    });
  }
  const path = isAbsolute(idOrPath) ? idOrPath : resolve(process.cwd(), idOrPath);
  let module: { default?: unknown };
  try {
    module = (await import(path)) as { default?: unknown };
  } catch (err) {
    throw new EnvError(`cannot load custom env ${path}: ${(err as Error).message}`, {
      fix: "check the path and that the file runs with `bun <file>`",
    });
  }
  return checkDefinition(module.default, path);
}

/** Validates `args` against the env's schema (defaults filled in) and creates the env. */
export async function createEnv(
  definition: EnvDefinition,
  args: unknown = {},
  where = `env ${definition.id}`,
): Promise<Env> {
  if (!definition.args) return definition.create(args ?? {});
  const parsed = definition.args.safeParse(args ?? {});
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => {
      const keys = "keys" in issue && Array.isArray(issue.keys) ? issue.keys.map(String) : [];
      const path = ["args", ...issue.path.map(String), ...(keys.length === 1 ? keys : [])].join(".");
      return `${path}: ${issue.message}`;
    });
    throw new ConfigError(`${where}: invalid args: ${issues.join("; ")}`, {
      fix: `see \`rlx env list\` and the ${definition.id} env's schema`,
    });
  }
  return definition.create(parsed.data);
}
