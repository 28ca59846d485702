// Custom envs, once their files may be loaded (resolution, resolve.ts, is synchronous and never
// loads env files; this runs before anything starts, in `rlx train` and its --dry-run alike):
//   - a custom env's name: in `[[orchestrator.train.env]]` a custom env's `id` is a file path;
//     without a `name`, the env is named by the `id` its file declares (`vowels`, not
//     `/path/to/vowels.ts`), so metrics keys, console lines and the summary read as they do for
//     built-ins;
//   - its `args`, train and eval entries alike, checked against the file's schema (defaults filled
//     in), so a typo is an error naming the config file and key path before a policy starts, as a
//     built-in's is at resolution.
import { ConfigError, configError, keyPath } from "../errors.ts";
import { isEnvPath, loadEnv } from "../envs/index.ts";
import type { ResolvedConfig } from "./resolve.ts";

/** Names each unnamed custom train env after its definition's id (names stay unique) and checks
 * every custom env's args, in place. */
export async function loadCustomEnvs(config: ResolvedConfig, source: string): Promise<void> {
  const lists = [
    ["train", config.orchestrator.train.env] as const,
    ["eval", config.orchestrator.eval?.env ?? []] as const,
  ];
  for (const [list, envs] of lists)
    for (const [i, env] of envs.entries()) {
      if (!isEnvPath(env.id)) continue;
      const path = ["orchestrator", list, "env", i];
      const definition = await loadEnv(env.id, { source, path: [...path, "id"] });
      if (!definition.args) continue;
      const parsed = definition.args.safeParse(env.args ?? {});
      if (!parsed.success)
        throw configError(parsed.error.issues, source, [...path, "args"], { schema: definition.args });
      env.args = parsed.data as Record<string, unknown>;
    }
  const envs = config.orchestrator.train.env;
  const taken = new Set(envs.map((env) => env.name));
  for (const [i, env] of envs.entries()) {
    if (env.name !== env.id || !isEnvPath(env.id)) continue;
    const name = (await loadEnv(env.id, { source, path: ["orchestrator", "train", "env", i, "id"] })).id;
    if (taken.has(name))
      throw new ConfigError(
        `${source}: ${keyPath(["orchestrator", "train", "env", i, "name"])}: the custom env ${env.id} is named "${name}" by its file, a name another env has`,
        { fix: `give this entry a name of its own, e.g. name = "${name}_2"` },
      );
    taken.delete(env.name);
    taken.add(name);
    env.name = name;
  }
}
