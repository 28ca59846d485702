// One JSON row of the needle warm start (docs/scaling.md, "Long context"): each SFT phase's config
// and its greedy pass@1 at every eval, read from the phases' run directories (scratch), with the CPU.
// An eval whose rollouts all failed is null (the in-process engine's 2,048-token default refused
// the longer prompts before [eval] max_model_len existed).
//   bun experiments/scripts/needle_warm_start.ts OUT CONFIG...
import { readFileSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { parse } from "smol-toml";

const [out, ...configs] = process.argv.slice(2);
if (!out || configs.length === 0) throw new Error("usage: needle_warm_start.ts OUT CONFIG...");

const phases = configs.map((config) => {
  const { output_dir: runDir } = parse(readFileSync(config, "utf8")) as { output_dir: string };
  const lines = readFileSync(join(runDir, "metrics.jsonl"), "utf8").trim().split("\n");
  const evals = lines
    .map((line) => JSON.parse(line) as Record<string, number>)
    .filter((m) => Object.keys(m).some((key) => key.endsWith("/pass@1")))
    .map((m) => ({
      step: m.step,
      ...Object.fromEntries(
        Object.entries(m)
          .filter(([key]) => key.endsWith("/pass@1"))
          .map(([key, value]) => {
            const env = key.split("/")[1]!;
            return [env, m[`eval/${env}/error_rate`] === 1 ? null : value];
          }),
      ),
    }));
  return { config, evals };
});
const row = { date: new Date().toISOString(), cpu: cpus()[0]!.model, cores: cpus().length, phases };
writeFileSync(out, JSON.stringify(row, null, 2) + "\n");
console.log(JSON.stringify(row));
