// `rlx replay RUN --step N --gradient | --rollouts`: recomputes a run's trainer steps from its kept
// step files and checkpoint and compares the weights with the recorded ones (src/replay/gradient.ts),
// or regenerates a step's rollouts from the policy engines' schedule records and compares their
// tokens and logprobs (src/replay/rollouts.ts); docs/run-directory.md "Replaying a step". Progress
// on stderr; the result as lines (or --json); exits 1 on any difference, so a script can gate on it.
import { defineCommand } from "citty";
import { ConfigError } from "../errors.ts";

export default defineCommand({
  meta: {
    name: "replay",
    description:
      "Recompute a step of a run after the fact and compare it with what the run recorded (--gradient: the trainer's update, from the newest checkpoint before it and the kept step files; --rollouts: the step's rollouts, regenerated from the policy's schedule records on the kept weights; both need ckpt.keep_steps = true)",
  },
  args: {
    run: { type: "positional", required: true, description: "The run directory (output_dir of rlx train)" },
    step: { type: "string", required: true, description: "The step to replay, 1..max_steps" },
    gradient: {
      type: "boolean",
      description: "Replay the trainer's update: steps K+1..N from checkpoint K, each kept step's weights compared",
    },
    rollouts: {
      type: "boolean",
      description:
        "Regenerate the step's rollouts (schedule records in RUN/schedule/, the audit records of the step, the weights of every version they used) and report the first token or logprob that differs",
    },
    json: { type: "boolean", description: "Print the result as one JSON object" },
  },
  async run({ args }) {
    if (args.gradient === args.rollouts)
      throw new ConfigError("rlx replay: say what to replay: --gradient (the trainer's update) or --rollouts", {
        fix: "rlx replay RUN --step N --gradient, or rlx replay RUN --step N --rollouts",
      });
    const step = Number(args.step);
    if (args.rollouts) return printRollouts(await replayRolloutsOf(args.run, step), args.json === true);
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

async function replayRolloutsOf(run: string, step: number) {
  if (!Number.isInteger(step) || step < 1)
    throw new ConfigError(`--step ${step}: expected a step the run trained (1 or more)`);
  const { replayRollouts } = await import("../replay/rollouts.ts");
  return replayRollouts(run, step, (line) => console.error(line));
}

function printRollouts(result: Awaited<ReturnType<typeof replayRolloutsOf>>, json: boolean): void {
  const d = result.first;
  if (json) console.log(JSON.stringify(result));
  else {
    for (const r of result.records) console.log(`${r.path}: replayed ${r.events} of ${r.of} events`);
    if (result.unmatched.length > 0)
      console.log(
        `${result.unmatched.length} rollouts are in no schedule record: ${result.unmatched.slice(0, 5).join(", ")}`,
      );
    console.log(
      d
        ? `step ${result.step}: first difference in rollout ${d.rollout_id} sample ${d.sample_index} at token ${d.position} (weights version ${d.version}): recorded ${d.recorded.token} (${d.recorded.logprob}), replayed ${d.replayed.token} (${d.replayed.logprob})`
        : `step ${result.step}: ${result.requests} requests of ${result.samples} samples, ${result.tokens} tokens and logprobs bit for bit (weights versions ${result.versions.join(", ")}) in ${result.seconds.toFixed(1)} s`,
    );
  }
  if (d || result.unmatched.length > 0) process.exitCode = 1;
}
