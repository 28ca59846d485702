// Loading a run config: schema defaults < the TOML file < --set overrides, then validation and
// per-env resolution. Every failure is a ConfigError naming the file and the key path (and the
// line, for TOML syntax errors); nothing here prints a stack trace.
import { existsSync, readFileSync } from "node:fs";
import { parse as parseToml, stringify as stringifyToml, TomlError } from "smol-toml";
import { ConfigError, configError } from "../errors.ts";
import { applyOverrides } from "./overrides.ts";
import { type Resolution, type ResolvedConfig, resolveConfig } from "./resolve.ts";
import { configSchema } from "./schema.ts";

export function readToml(path: string): Record<string, unknown> {
  if (!existsSync(path))
    throw new ConfigError(`config file not found: ${path}`, {
      fix: "give the path of a .toml file, e.g. configs/quickstart.toml",
    });
  try {
    return parseToml(readFileSync(path, "utf8")) as Record<string, unknown>;
  } catch (err) {
    if (err instanceof TomlError) {
      const first = err.message.split("\n")[0];
      throw new ConfigError(`${path}:${err.line}:${err.column}: TOML syntax error: ${first}`);
    }
    throw new ConfigError(`cannot read ${path}: ${(err as Error).message}`);
  }
}

export function loadConfig(path: string, overrides: readonly string[] = []): Resolution {
  const raw = readToml(path);
  applyOverrides(raw, overrides);
  const source = overrides.length ? `${path} (with --set)` : path;
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) throw configError(parsed.error.issues, source, [], { schema: configSchema });
  return resolveConfig(parsed.data, source);
}

/** Drops undefined values (TOML has no null) so the resolved config serializes. */
function defined(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(defined);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [k, defined(v)]),
    );
  }
  return value;
}

/** The resolved config without what resolution derives that no config key holds: each env's
 * `loss` (its algo block's `loss`, else [trainer.loss], both kept), so the TOML loads again. */
function withoutEnvLosses(config: ResolvedConfig): unknown {
  const env = config.orchestrator.train.env.map(({ loss: _, ...rest }) => rest);
  return { ...config, orchestrator: { ...config.orchestrator, train: { ...config.orchestrator.train, env } } };
}

/** The resolved config as TOML: what `rlx train --dry-run` prints and a run writes to its directory
 * (the trainer loads it again). */
export function resolvedToml(config: ResolvedConfig): string {
  return stringifyToml(defined(withoutEnvLosses(config)) as Record<string, unknown>);
}
