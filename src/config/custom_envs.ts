// Custom envs, once their files may be loaded (resolution, resolve.ts, is synchronous and never
// loads env files; this runs before anything starts, in `rlx train` and its --dry-run alike):
//   - a custom env's name: in `[[orchestrator.train.env]]` a custom env's `id` is a file path or an
//     env server's URL; without a `name`, the env is named by the `id` its file or its server's
//     /info declares (`vowels`, not `/path/to/vowels.ts`), so metrics keys, console lines and the
//     summary read as they do for built-ins (a server that does not answer is an error here);
//   - its `args`, train and eval entries alike, checked against the file's schema, so a typo is an
//     error naming the config file and key path before a policy starts, as a built-in's is at
//     resolution. The args stay as written: the env parses them when it is created.
import { ConfigError, keyPath } from "../errors.ts";
import { DEFAULT_REMOTE, isEnvPath, isEnvUrl, loadEnv, parseEnvArgs, remoteSettings } from "../envs/index.ts";
import type { EnvDefinition } from "../envs/types.ts";
import type { ResolvedConfig } from "./resolve.ts";

/** A custom env entry's definition (its file's, or its server's), its args checked against the
 * file's schema; undefined for a built-in. `path` is the entry's key path in `source`. */
export async function customEnvDefinition(
  env: { id: string; args?: Record<string, unknown>; remote?: Parameters<typeof remoteSettings>[0] },
  source: string,
  path: readonly (string | number)[],
): Promise<EnvDefinition | undefined> {
  if (!isEnvPath(env.id) && !isEnvUrl(env.id)) return undefined;
  const site = { source, path: [...path, "id"] };
  const definition = await loadEnv(env.id, site, env.remote ? remoteSettings(env.remote) : DEFAULT_REMOTE);
  if (definition.args) parseEnvArgs(definition.args, env.args ?? {}, source, [...path, "args"]);
  return definition;
}

/** Checks every custom env's args and names each unnamed custom train env after its definition's
 * id (names stay unique), in place. */
export async function loadCustomEnvs(config: ResolvedConfig, source: string): Promise<void> {
  const train = config.orchestrator.train.env;
  const taken = new Set(train.map((env) => env.name));
  const lists = [["train", train] as const, ["eval", config.orchestrator.eval?.env ?? []] as const];
  for (const [list, envs] of lists)
    for (const [i, env] of envs.entries()) {
      const path = ["orchestrator", list, "env", i];
      const definition = await customEnvDefinition(env, source, path);
      if (!definition || list === "eval" || !("name" in env) || env.name !== env.id) continue;
      if (taken.has(definition.id))
        throw new ConfigError(
          `${source}: ${keyPath([...path, "name"])}: the env ${env.id} is named "${definition.id}" by its ${isEnvUrl(env.id) ? "server" : "file"}, a name another env has`,
          { fix: `give this entry a name of its own, e.g. name = "${definition.id}_2"` },
        );
      taken.delete(env.name);
      taken.add(definition.id);
      env.name = definition.id;
    }
}
