// The `rlx train` run that bench/train_overlap.ts and bench/train_ranks.ts time: a random tiny
// model on the letters env (reward = share of lowercase letters, so every group has something to
// train and every step is a real step), in a temp directory, as a child process. The benches
// differ only in a few config lines and CLI flags; the per-step metrics of steps 2.. come back
// (step 1 has no overlap to gain and includes start-up).
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { initModel } from "../src/model/presets.ts";
import { LETTERS_ENV } from "../test/e2e/train_helpers.ts";

export type Row = Record<string, number>;

export interface LettersShape {
  steps: number;
  batch: number;
  group: number;
  tokens: number;
}

/** A temp directory holding the tiny model and the letters env file. */
export async function lettersWorkspace(prefix: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  await initModel({ preset: "tiny", out: join(dir, "tiny"), seed: 0, dtype: "f32" });
  writeFileSync(join(dir, "letters.ts"), LETTERS_ENV);
  return dir;
}

/** Runs `rlx train` once; `trainer` and `orchestrator` are extra lines of those config tables. */
export function lettersRun(
  dir: string,
  name: string,
  shape: LettersShape,
  extra: { trainer?: string[]; orchestrator?: string[]; args?: string[] } = {},
): { wall: number; rows: Row[] } {
  const runDir = join(dir, name);
  const config = join(dir, `${name}.toml`);
  writeFileSync(
    config,
    `output_dir = ${JSON.stringify(runDir)}
max_steps = ${shape.steps}
model = { path = ${JSON.stringify(join(dir, "tiny"))} }
[trainer]
${(extra.trainer ?? []).join("\n")}
[trainer.optim]
lr = 1e-4
[orchestrator]
batch_size = ${shape.batch}
group_size = ${shape.group}
seq_len = 256
max_tokens = ${shape.tokens}
${(extra.orchestrator ?? []).join("\n")}
[inference]
port = ${20000 + Math.floor(Math.random() * 20000)}
[[orchestrator.train.env]]
id = ${JSON.stringify(join(dir, "letters.ts"))}
name = "letters"
`,
  );
  const started = performance.now();
  const proc = Bun.spawnSync(
    [process.execPath, join(import.meta.dir, "../src/main.ts"), "train", config, ...(extra.args ?? [])],
    { stdout: "pipe", stderr: "pipe" },
  );
  const wall = (performance.now() - started) / 1000;
  if (proc.exitCode !== 0) throw new Error(`rlx train (${name}) failed:\n${proc.stderr.toString()}`);
  const rows = readFileSync(join(runDir, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Row);
  return { wall, rows: rows.filter((row) => row.step! >= 2) };
}
