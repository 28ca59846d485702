// Loads a user's plugin file: a custom algorithm (src/algorithms/registry.ts), sampler
// (src/task_samplers/registry.ts), judge (src/judges/index.ts) or env (src/envs/index.ts) is a .ts file
// that a compiled rlx binary imports from disk, so the file needs none of rlx's sources (nor any
// package: what it needs comes in a kit). Two kinds: a factory, whose default export receives a kit
// (the base class, zod, helpers) and returns a class extending that base; and an object (an env),
// default-exported as it is or returned by a function of its kit, checked against a schema. One loader,
// so every kind fails the same way: a ConfigError naming the config file, the key the user typed,
// the file, and the shape the file must have.
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { z } from "zod";
import { ConfigError, configError, keyPath } from "./errors.ts";

/** Where a config names a plugin file, for errors. */
export interface PluginSite {
  /** The config file the key is in (or what else named the file: "rlx env"). */
  source: string;
  /** The key path the user typed (orchestrator.train.env[1].algo.path); empty when no key names it. */
  path: readonly (string | number)[];
}

/** A default export that receives `kit` and returns a class extending `base` (Algorithm, Sampler, Judge). */
export interface FactoryKind {
  base: abstract new (...args: any[]) => unknown;
  kit: unknown;
  /** The file's expected shape with its doc, for the fix line. */
  shape: string;
}

/** A default export that is a plain object `schema` accepts (an EnvDefinition), or a function that
 * receives `kit` and returns one (the form in which a file gets zod without importing it). */
export interface ObjectKind<T> {
  schema: z.ZodType<T>;
  kit: unknown;
  /** The file's expected shape, for the fix line. */
  shape: string;
}

/** `FILE: key.path`, the start of every message about the site. */
export function siteText(site: PluginSite): string {
  return site.path.length ? `${site.source}: ${keyPath(site.path)}` : site.source;
}

/** The site of a key inside a block's site: the key that names the file (`path`, an env's `id`). */
export function keySite(site: PluginSite, key: string | number): PluginSite {
  return { source: site.source, path: [...site.path, key] };
}

/** Refuses a plugin path that names no file (at config time, before anything runs). */
export function checkPluginFile(file: string, site: PluginSite): void {
  if (!existsSync(file))
    throw new ConfigError(`${siteText(site)}: no such file "${file}"`, {
      fix: "paths are relative to the directory rlx runs in",
    });
}

/**
 * Imports `file` (relative to the working directory) and checks its default export: a factory is
 * called with the kit and must return a class extending the base; an object must match the schema.
 */
export async function loadPlugin<T>(file: string, site: PluginSite, kind: ObjectKind<T>): Promise<T>;
export async function loadPlugin(file: string, site: PluginSite, kind: FactoryKind): Promise<unknown>;
export async function loadPlugin(file: string, site: PluginSite, kind: FactoryKind | ObjectKind<unknown>) {
  const at = siteText(site);
  let module: { default?: unknown };
  try {
    module = await import(resolve(file));
  } catch (err) {
    // the binary's own modules live at /$bunfs/...: not a path the user can open
    const message = (err as Error).message.replaceAll(/\/\$bunfs\/\S*/g, "the rlx binary");
    const pkg = /Cannot find (?:package|module) '([^'./][^']*)'/.exec(message)?.[1];
    throw new ConfigError(`${at}: cannot import "${file}": ${message}`, {
      fix: pkg
        ? `a plugin file cannot import packages ("${pkg}"): its default export receives a kit with what it needs (zod as z), as in ${kind.shape}`
        : "paths are relative to the directory rlx runs in; the message above says what in the file fails to load",
    });
  }
  let value = module.default;
  const fix = { fix: kind.shape };
  if ("schema" in kind) {
    if (typeof value === "function") {
      if (/^class\b/.test(Function.prototype.toString.call(value)))
        throw new ConfigError(`${at}: the default export of "${file}" is a class, not an object`, fix);
      try {
        value = await (value as (kit: unknown) => unknown)(kind.kit);
      } catch (err) {
        throw new ConfigError(`${at}: the default export of "${file}" threw: ${(err as Error).message}`, fix);
      }
    }
    if (typeof value !== "object" || value === null)
      throw new ConfigError(
        `${at}: "${file}" has no default export object (or function of the kit returning one)`,
        fix,
      );
    const result = kind.schema.safeParse(value);
    if (!result.success)
      throw configError(result.error.issues, `${at}: the default export of "${file}"`, [], {
        ...fix,
        schema: kind.schema,
      });
    return value;
  }
  if (typeof value !== "function") throw new ConfigError(`${at}: "${file}" has no default export function`, fix);
  let cls: unknown;
  try {
    cls = (value as (kit: unknown) => unknown)(kind.kit);
  } catch (err) {
    throw new ConfigError(`${at}: the default export of "${file}" threw: ${(err as Error).message}`, fix);
  }
  if (typeof cls !== "function" || !(cls.prototype instanceof kind.base))
    throw new ConfigError(
      `${at}: the default export of "${file}" must return a class extending the ${kind.base.name} it is given`,
      fix,
    );
  return cls;
}
