// `rlx train CONFIG`: load and resolve the config (defaults < file < --set), print warnings,
// and with --dry-run print the resolved config (every env's algorithm spelled out) and stop.
import { defineCommand } from "citty";
import { consola } from "consola";
import { loadConfig, resolvedToml } from "../config/load.ts";
import { NotBuiltError } from "../errors.ts";
import { repeated } from "./run.ts";

export default defineCommand({
  meta: { name: "train", description: "Train a policy with RL on the environments of a TOML config" },
  args: {
    config: { type: "positional", required: true, description: "Run config (TOML), e.g. configs/quickstart.toml" },
    set: { type: "string", description: "Override a key, typed by the schema: --set trainer.optim.lr=3e-4 (repeatable)" },
    "dry-run": { type: "boolean", description: "Print the resolved config and exit; writes nothing" },
    json: { type: "boolean", description: "With --dry-run: print the resolved config as JSON" },
    resume: { type: "boolean", description: "Continue the run in output_dir from its last checkpoint" },
    "resume-from": { type: "string", description: "Continue from a checkpoint directory of another run" },
  },
  async run({ args, rawArgs }) {
    const { config, warnings } = loadConfig(args.config, repeated(rawArgs, "--set"));
    for (const w of warnings) consola.warn(w);
    if (args["dry-run"]) {
      if (args.json) console.log(JSON.stringify({ config, warnings }, null, 2));
      else {
        const envs = config.orchestrator.train.env.map((e) => `${e.name}->${e.algo.type}`).join(", ");
        console.log(`# resolved ${args.config}: ${envs}\n${resolvedToml(config)}`);
      }
      return;
    }
    throw new NotBuiltError(`config ${args.config} is valid (${config.orchestrator.train.env.length} train envs), but the training loop is not built yet; nothing was written`, {
      fix: "use --dry-run to see the resolved config; `rlx init` and `rlx env` work today",
    });
  },
});
