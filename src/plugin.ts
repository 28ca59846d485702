// Loads a user's plugin file: a custom algorithm (src/algorithms/registry.ts) or sampler
// (src/sampling/registry.ts) is a .ts file whose default export receives a kit (the base class, zod,
// helpers) and returns a class extending that base. A compiled rlx binary imports .ts files from
// disk, so the file needs none of rlx's sources. One loader, so both kinds fail the same way: a
// ConfigError naming the key the user typed (`at`) and the shape the file must have.
import { resolve } from "node:path";
import { ConfigError } from "./errors.ts";

export interface PluginKind {
  /** The base class the returned class must extend (Algorithm, Sampler). */
  base: abstract new (...args: any[]) => unknown;
  /** What the factory receives. */
  kit: unknown;
  /** The file's expected shape with its doc, for the fix line. */
  shape: string;
}

/** Imports `file` (relative to the working directory), calls its default export with the kit, checks the class. */
export async function loadPluginClass(file: string, at: string, kind: PluginKind): Promise<unknown> {
  let module: { default?: unknown };
  try {
    module = await import(resolve(file));
  } catch (err) {
    throw new ConfigError(`${at}: cannot import "${file}": ${(err as Error).message}`, {
      fix: "paths are relative to the directory rlx runs in",
    });
  }
  if (typeof module.default !== "function")
    throw new ConfigError(`${at}: "${file}" has no default export function`, { fix: kind.shape });
  let cls: unknown;
  try {
    cls = (module.default as (kit: unknown) => unknown)(kind.kit);
  } catch (err) {
    throw new ConfigError(`${at}: the default export of "${file}" threw: ${(err as Error).message}`, {
      fix: kind.shape,
    });
  }
  if (typeof cls !== "function" || !(cls.prototype instanceof kind.base))
    throw new ConfigError(
      `${at}: the default export of "${file}" must return a class extending the ${kind.base.name} it is given`,
      { fix: kind.shape },
    );
  return cls;
}
