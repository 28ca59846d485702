// `rlx replay RUN --step N --gradient`: recomputes a run's trainer steps from its kept step files
// and checkpoint, and compares the weights with the recorded ones (src/replay/gradient.ts,
// docs/run-directory.md "Replaying a step"). Progress on stderr; per step a line (or --json);
// exits 1 when any compared step differs, so a script can gate on it.
import { defineCommand } from "citty";
import { ConfigError } from "../errors.ts";

export default defineCommand({
  meta: {
    name: "replay",
    description:
      "Recompute a step of a run after the fact and compare it with what the run recorded (--gradient: the trainer's update, from the newest checkpoint before it and the kept step files; the run needs ckpt.keep_steps = true)",
  },
  args: {
    run: { type: "positional", required: true, description: "The run directory (output_dir of rlx train)" },
    step: { type: "string", required: true, description: "The step to replay, 1..max_steps" },
    gradient: {
      type: "boolean",
      description: "Replay the trainer's update: steps K+1..N from checkpoint K, each kept step's weights compared",
    },
    json: { type: "boolean", description: "Print the result as one JSON object" },
  },
  async run({ args }) {
    if (!args.gradient)
      throw new ConfigError("rlx replay: say what to replay: --gradient (the trainer's update)", {
        fix: "rlx replay RUN --step N --gradient",
      });
    const step = Number(args.step);
    const { replayGradient } = await import("../replay/gradient.ts");
    const result = await replayGradient(args.run, step, (line) => console.error(line));
    if (args.json) console.log(JSON.stringify(result));
    else {
      for (const { step: k, what, comparison: c } of result.steps) {
        const first = c.differing[0];
        const name =
          what === "checkpoint" ? `checkpoint ${k} (against the weights published at step ${k})` : `step ${k}`;
        console.log(
          first
            ? `${name}: ${c.differing.length} of ${c.tensors} tensors differ, max |diff| ${c.maxAbsDiff.toExponential(3)}; first ${first.name} (${first.differing} of ${first.elements} elements, max ${first.maxAbsDiff.toExponential(3)})`
            : `${name}: all ${c.tensors} tensors identical`,
        );
      }
      console.log(
        `replayed steps ${result.from + 1}..${result.step} from ${result.from ? `checkpoint ${result.from}` : "the start"} on ${result.ranks} rank(s) in ${result.seconds.toFixed(1)} s: ${result.firstDiffering === undefined ? "every compared step bit for bit" : `first difference at step ${result.firstDiffering}`}`,
      );
    }
    if (result.steps.some((s) => s.comparison.differing.length > 0)) process.exitCode = 1;
  },
});
