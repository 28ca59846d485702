// A custom env's name. In `[[orchestrator.train.env]]` a custom env's `id` is a file path; without
// a `name`, the env is named by the `id` its file declares (`vowels`, not `/path/to/vowels.ts`),
// so metrics keys, console lines and the summary read as they do for built-ins. Resolution
// (resolve.ts) is synchronous and never loads env files; this runs once the file may be loaded.
import { ConfigError, keyPath } from "../errors.ts";
import { isEnvPath, loadEnv } from "../envs/index.ts";
import type { ResolvedConfig } from "./resolve.ts";

/** Renames, in place, each unnamed custom train env after its definition's id; names stay unique. */
export async function nameCustomEnvs(config: ResolvedConfig, source: string): Promise<void> {
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
