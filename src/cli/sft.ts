// `rlx sft CONFIG [--set k=v]... [--resume | --force]`: supervised fine-tuning from a TOML config
// (src/sft/config.ts) on a JSONL dataset of chat messages or prompt/completion rows. Prints one
// line per step and a summary table (with the before/after eval when [eval] is set); `--json`
// prints the summary as one JSON object instead of the table. `--resume` continues the run in
// output_dir from its newest whole checkpoint; a fresh start over a run needs `--force`, like
// `rlx train`. A SIGTERM checkpoints the last finished step (save.on_sigterm) and exits 143.
// The work is runSft in src/sft/run.ts.
import { defineCommand } from "citty";
import { consola } from "consola";
import { stringify as stringifyToml } from "smol-toml";
import { ConfigError } from "../errors.ts";
import { repeated } from "./run.ts";

function duration(seconds: number): string {
  const m = Math.floor(seconds / 60);
  return m > 0 ? `${m}m${String(Math.round(seconds % 60)).padStart(2, "0")}s` : `${seconds.toFixed(1)}s`;
}

export default defineCommand({
  meta: {
    name: "sft",
    description: "Supervised fine-tuning on a JSONL dataset (chat messages or prompt/completion) from a TOML config",
  },
  args: {
    config: { type: "positional", required: true, description: "SFT config (TOML), e.g. configs/sft_math.toml" },
    set: { type: "string", description: "Override a key: --set trainer.steps=100 (repeatable)" },
    "dry-run": { type: "boolean", description: "Print the resolved config and exit; writes nothing" },
    json: { type: "boolean", description: "Print the summary as JSON (step lines go to stderr)" },
    resume: { type: "boolean", description: "Continue the run in output_dir from its last checkpoint" },
    force: {
      type: "boolean",
      description: "Delete a previous run in output_dir (metrics, checkpoints, model) and start over",
    },
  },
  async run({ args, rawArgs }) {
    const { loadSftRun } = await import("../sft/config.ts");
    const config = await loadSftRun(args.config, repeated(rawArgs, "--set"));
    if (args["dry-run"]) {
      console.log(`# resolved ${args.config}\n${stringifyToml(JSON.parse(JSON.stringify(config)))}`);
      return;
    }
    if (args.resume && args.force)
      throw new ConfigError("--resume and --force contradict each other", {
        fix: "--resume continues the run in output_dir; --force deletes it and starts over",
      });
    const { runSft } = await import("../sft/run.ts");
    const summary = await runSft(config, {
      log: (line) => (args.json ? console.error(line) : console.log(line)),
      warn: (line) => consola.warn(line),
      resume: Boolean(args.resume),
      force: Boolean(args.force),
    });
    if (summary.stopped) {
      console.error(
        `rlx sft: stopped by ${summary.stopped} after step ${summary.steps}; continue with rlx sft ${args.config} --resume`,
      );
      process.exit(143);
    }
    if (args.json) {
      const { evalBefore, evalAfter, ...rest } = summary;
      const strip = (results: typeof evalAfter) => results.map(({ results: _perTask, ...r }) => r);
      console.log(JSON.stringify({ ...rest, evalBefore: strip(evalBefore), evalAfter: strip(evalAfter) }));
      return;
    }
    const { compareTable, formatTable } = await import("../eval/table.ts");
    const rate = Math.round(summary.tokens / Math.max(summary.trainSeconds, 1e-9));
    console.log("");
    console.log(
      formatTable(
        ["sft", ""],
        [
          ["steps", String(summary.steps)],
          ["epochs", summary.epochs.toFixed(2)],
          ["tokens", summary.tokens.toLocaleString("en-US")],
          ["nll first -> last", `${summary.firstNll.toFixed(4)} -> ${summary.lastNll.toFixed(4)}`],
          [
            "time (training)",
            `${duration(summary.seconds)} (${duration(summary.trainSeconds)}, ${rate.toLocaleString("en-US")} tok/s)`,
          ],
          ["truncated examples", String(summary.truncatedExamples)],
          ...(summary.band
            ? [
                [
                  "stopped in band",
                  `${summary.band.metric} ${summary.band.value.toFixed(3)} in [${summary.band.min}, ${summary.band.max ?? "∞"}] at step ${summary.band.step}`,
                ],
              ]
            : []),
          ["model", summary.modelDir],
          ["metrics", `${summary.outputDir}/metrics.jsonl (rlx report ${summary.outputDir})`],
        ],
      ),
    );
    if (summary.evalAfter.length > 0) console.log(`\n${compareTable(summary.evalBefore, summary.evalAfter)}`);
  },
});
