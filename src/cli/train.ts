// `rlx train CONFIG`: load and resolve the config (defaults < file < --set), print warnings,
// and with --dry-run print the resolved config (every env's algorithm and rl loss spelled out) and stop.
// Otherwise run it (src/orchestrator/run.ts): the trainer and policy as child processes, the
// orchestrator here, one line per step, and a summary table with the report command at the end.
// `--nproc N` is `--set trainer.world_size=N` (data-parallel trainer ranks, docs/scaling.md);
// `--max-restarts N` is `--set ckpt.max_restarts=N` (src/orchestrator/restarts.ts).
import { defineCommand } from "citty";
import { consola } from "consola";
import { loadConfig, resolvedToml } from "../config/load.ts";
import { loadCustomEnvs } from "../config/custom_envs.ts";
import { lossSettings, lossText } from "../config/loss_text.ts";
import { ConfigError } from "../errors.ts";
import { repeated } from "./run.ts";

const INFERENCE = ["auto", "spawn", "in-process"] as const;

export default defineCommand({
  meta: { name: "train", description: "Train a policy with RL on the environments of a TOML config" },
  args: {
    config: { type: "positional", required: true, description: "Run config (TOML), e.g. configs/quickstart.toml" },
    set: {
      type: "string",
      description: "Override a key, typed by the schema: --set trainer.optim.lr=3e-4 (repeatable)",
    },
    "dry-run": { type: "boolean", description: "Print the resolved config and exit; writes nothing" },
    json: { type: "boolean", description: "With --dry-run: print the resolved config as JSON" },
    resume: { type: "boolean", description: "Continue the run in output_dir from its last checkpoint" },
    "resume-if-any": {
      type: "boolean",
      description:
        "Continue the run in output_dir from its newest whole checkpoint if it has one, else start it (over what a run without a checkpoint left; from --resume-from if given): for a job script run again",
    },
    "resume-from": { type: "string", description: "Continue from a checkpoint directory of another run" },
    force: { type: "boolean", description: "Delete a previous run in output_dir and start over" },
    nproc: { type: "string", description: "Data-parallel trainer ranks (trainer.world_size); applied after --set" },
    "max-restarts": {
      type: "string",
      description:
        "Resume the run from its newest checkpoint by itself when a child dies, up to N times (ckpt.max_restarts); applied after --set",
    },
    inference: {
      type: "string",
      description:
        "Without [inference] base_urls: spawn `rlx serve --policy` (spawn) or run the policy in this process (in-process); default auto",
    },
  },
  async run({ args, rawArgs }) {
    const overrides = repeated(rawArgs, "--set");
    if (args.nproc !== undefined) {
      if (!/^[1-9]\d*$/.test(args.nproc))
        throw new ConfigError(`--nproc ${args.nproc}: expected a positive number of trainer ranks`);
      overrides.push(`trainer.world_size=${args.nproc}`);
    }
    const restarts = args["max-restarts"];
    if (restarts !== undefined) {
      if (!/^\d+$/.test(restarts))
        throw new ConfigError(`--max-restarts ${restarts}: expected a number of restarts (0 or more)`);
      overrides.push(`ckpt.max_restarts=${restarts}`);
    }
    if (args["dry-run"]) {
      const { config, warnings } = loadConfig(args.config, overrides);
      await loadCustomEnvs(config, args.config);
      const { checkModelDir } = await import("../config/model_check.ts");
      const model = checkModelDir(config.model.path, config.orchestrator.seq_len);
      warnings.push(...model.warnings);
      for (const w of warnings) consola.warn(w);
      const envs = config.orchestrator.train.env;
      if (args.json) {
        // each env's loss as it trains, and the settings its type reads
        const losses = Object.fromEntries(
          envs.map((e) => [e.name, e.loss ? { ...e.loss, reads: lossSettings(e.loss) } : null]),
        );
        console.log(JSON.stringify({ config, losses, model: model.line, warnings }, null, 2));
      } else {
        const names = envs
          .map((e) => `${e.name}->${e.algo.type}${e.judge ? ` (judge: ${e.judge.type} ${e.judge.name})` : ""}`)
          .join(", ");
        const losses = envs.map((e) => `# ${e.name} rl loss: ${e.loss ? lossText(e.loss) : "none (no rl tokens)"}\n`);
        console.log(`# resolved ${args.config}: ${names}\n${losses.join("")}# ${model.line}\n${resolvedToml(config)}`);
      }
      return;
    }
    if (args["resume-if-any"] && (args.resume || args.force))
      throw new ConfigError(`--resume-if-any and --${args.resume ? "resume" : "force"}: choose one`);
    const inference = (args.inference ?? "auto") as (typeof INFERENCE)[number];
    if (!INFERENCE.includes(inference))
      throw new ConfigError(`--inference ${args.inference}: expected one of ${INFERENCE.join(", ")}`);
    const { trainWithRestarts } = await import("../orchestrator/restarts.ts");
    const started = performance.now();
    const result = await trainWithRestarts({
      configPath: args.config,
      overrides,
      resume: Boolean(args.resume),
      resumeIfAny: Boolean(args["resume-if-any"]),
      ...(args["resume-from"] ? { resumeFrom: args["resume-from"] } : {}),
      force: Boolean(args.force),
      inference,
      print: (line) => console.log(line),
      info: (line) => consola.info(line),
      warn: (line) => consola.warn(line),
    });
    console.log(`\n${result.summary}\n`);
    console.log(`done in ${((performance.now() - started) / 1000).toFixed(1)} s; run directory ${result.runDir}`);
    console.log(`report: rlx report ${result.runDir}`);
  },
});
