// `deterministic = true`: two runs of the same config, from a fresh random model with a dense
// reward (the letters env), give bit-identical weights at every published step and identical
// metrics on every key but timings. The runs must also have trained (weights move, rewards vary),
// or equality would prove nothing. And a run killed with -9 after a checkpoint and resumed ends
// with the same weights at every step as the run that was never stopped, and two trainer ranks of
// two threads each are as repeatable (docs/run-directory.md, "Deterministic runs").
import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  processesMentioning,
  readMetrics,
  rlx,
  until,
  untilWhileRunning,
  writeConfig,
  sharedWorkspace,
} from "./train_helpers.ts";

const ws = sharedWorkspace();

const STEPS = 3;
const digest = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");
const timing = (key: string) => key === "time" || key.startsWith("time/") || key.startsWith("throughput/");

/** A run of the test's config; `killAfterCheckpoint` SIGKILLs it once that checkpoint is whole, then resumes it. */
async function run(
  name: string,
  killAfterCheckpoint?: number,
  trainer = "",
): Promise<{ weights: string[]; metrics: Record<string, number>[] }> {
  const { path, runDir } = writeConfig(
    ws,
    name,
    `max_steps = ${STEPS}
deterministic = true
[trainer]
${trainer}
[trainer.optim]
lr = 3e-3
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 128
max_tokens = 12
max_async_level = 0
[ckpt]
interval = 1
keep = ${STEPS}
[orchestrator.eval]
interval = 2
num_examples = 4
k = 2
[[orchestrator.eval.env]]
id = ${JSON.stringify(ws.lettersEnv)}
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "letters"
`,
  );
  if (killAfterCheckpoint !== undefined) {
    const killed = rlx(["train", path]);
    const manifest = join(runDir, "checkpoints", `step_${killAfterCheckpoint}`, "manifest.json");
    await untilWhileRunning(killed, () => existsSync(manifest), 60_000, `checkpoint ${killAfterCheckpoint}`);
    killed.proc.kill("SIGKILL");
    await killed.done;
    await until(() => processesMentioning(runDir).length === 0, 30_000, "no process of the run left", 50);
  }
  const { code, err } = await rlx(["train", path, ...(killAfterCheckpoint === undefined ? [] : ["--resume"])]).done;
  expect(err).not.toContain("error:");
  expect(code).toBe(0);
  const weights = Array.from({ length: STEPS }, (_, i) =>
    digest(join(runDir, "weights", `step_${i + 1}`, "model.safetensors")),
  );
  const metrics = readMetrics(runDir).map((row) =>
    Object.fromEntries(Object.entries(row).filter(([key]) => !timing(key))),
  );
  return { weights, metrics };
}

test("deterministic = true: two runs give bit-identical weights and identical non-timing metrics", async () => {
  const first = await run("first");
  const second = await run("second");
  expect(new Set(first.weights).size).toBe(STEPS); // every step changed the weights
  expect(first.metrics.some((row) => (row["reward/letters"] ?? 0) > 0)).toBe(true);
  expect(first.metrics.some((row) => typeof row["eval/letters/avg@2"] === "number")).toBe(true);
  expect(second.weights).toEqual(first.weights);
  expect(second.metrics).toEqual(first.metrics);
}, 120_000);

test("deterministic = true: a run killed with -9 after checkpoint 1 and resumed ends bitwise equal", async () => {
  const whole = await run("whole");
  const resumed = await run("resumed", 1);
  expect(new Set(whole.weights).size).toBe(STEPS);
  expect(resumed.weights).toEqual(whole.weights);
  // the resumed run evaluates no step 0 again; every step's line is the uninterrupted run's
  expect(resumed.metrics.filter((row) => row.step! > 0)).toEqual(whole.metrics.filter((row) => row.step! > 0));
}, 180_000);

test("deterministic = true on two trainer ranks of two threads each: two runs give bit-identical weights", async () => {
  const trainer = "world_size = 2\nthreads = 2";
  const first = await run("ranks-first", undefined, trainer);
  const second = await run("ranks-second", undefined, trainer);
  expect(new Set(first.weights).size).toBe(STEPS);
  expect(second.weights).toEqual(first.weights);
  expect(second.metrics).toEqual(first.metrics);
}, 180_000);
