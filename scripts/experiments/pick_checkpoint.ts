// Picks the SFT checkpoint to start RL from: the eval step whose held-out greedy pass@1 lies in
// [low, high] and is closest to `target`. SFT accuracy on addition jumps steeply (a few hundred
// steps take it from ~0 to ~0.8), so the student is chosen from frequent evals rather than by a
// step count fixed in advance. Prints the checkpoint's model directory (`checkpoints/step_N/trainer/model`,
// HF layout; runs from before resumable checkpoints have the model at `checkpoints/step_N`) and its
// pass@1 (tab-separated).
//
//   bun scripts/experiments/pick_checkpoint.ts RUN_DIR [--low 0.2] [--high 0.6] [--target 0.35]
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

const runDir = process.argv[2];
if (!runDir) throw new Error("usage: pick_checkpoint.ts RUN_DIR [--low L] [--high H] [--target T]");
const [low, high, target] = [option("low", 0.2), option("high", 0.6), option("target", 0.35)];
const KEY = "eval/math/greedy/pass@1";

const evals_E = readFileSync(join(runDir, "metrics.jsonl"), "utf8")
  .trim()
  .split("\n")
  .map((line) => JSON.parse(line) as Record<string, number>)
  .filter((row) => KEY in row)
  .map((row) => {
    const checkpoint = join(runDir, "checkpoints", `step_${row.step}`);
    const model = join(checkpoint, "trainer/model");
    return { step: row.step!, pass1: row[KEY]!, dir: existsSync(model) ? model : checkpoint };
  })
  .filter((e) => existsSync(join(e.dir, "config.json")));

const inBand = evals_E
  .filter((e) => e.pass1 >= low && e.pass1 <= high)
  .sort((a, b) => Math.abs(a.pass1 - target) - Math.abs(b.pass1 - target));
const best = inBand[0];
if (!best) {
  const seen = evals_E.map((e) => `${e.step}:${e.pass1}`).join(" ");
  console.error(
    `no checkpoint of ${runDir} has greedy pass@1 in [${low}, ${high}] (step:pass@1 = ${seen || "none"}); train longer or save more often`,
  );
  process.exit(1);
}
console.log(`${best.dir}\t${best.pass1}`);
