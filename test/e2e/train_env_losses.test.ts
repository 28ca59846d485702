// Per-env rl losses end to end (docs/architecture.md §6): a run of two envs on different loss types
// (a: grpo with [trainer.loss]'s dppo_kl, b: grpo with loss = { type = "gspo" }) writes step files
// whose loss table holds both and whose rows give each b sample code 1, and trains to finite
// metrics; and a config naming a loss only in [trainer.loss] and the same config with each env's
// algo naming that loss train bit-identical weights (deterministic = true, docs/run-directory.md
// "Deterministic runs"): one table entry, every code 0, so the same step files.
import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { rlLoss } from "../../src/data/loss_types.ts";
import { decodeStepBatch, type StepBatch } from "../../src/rundir/step_file.ts";
import { readMetrics, rlx, sharedWorkspace, untilWhileRunning, type Workspace, writeConfig } from "./train_helpers.ts";

const ws = sharedWorkspace();
const STEPS = 3;
const MAX_TOKENS = 12;
const digest = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

const runHead = (deterministic: boolean) => `max_steps = ${STEPS}
deterministic = ${deterministic}
[trainer.optim]
lr = 3e-3
`;
const orchestrator = (asyncLevel: number, batchSize = 8) => `[orchestrator]
batch_size = ${batchSize}
group_size = 4
seq_len = 128
max_tokens = ${MAX_TOKENS}
max_async_level = ${asyncLevel}
`;
const envBlock = (w: Workspace, name: string, algo = "") =>
  `[[orchestrator.train.env]]\nid = ${JSON.stringify(w.lettersEnv)}\nname = "${name}"\n${algo ? `algo = ${algo}\n` : ""}`;

test("two envs on dppo_kl and gspo: the step file's table and per-sample codes, finite metrics", async () => {
  const { path, runDir } = writeConfig(
    ws,
    "mixed",
    runHead(false) +
      orchestrator(1, 16) + // 4 groups a step: both envs drawn (the uniform sampler) but with odds 2^-12
      envBlock(ws, "a") +
      envBlock(ws, "b", `{ type = "grpo", loss = { type = "gspo" } }`),
  );
  // a step file lives until the trainer publishes its step; with max_async_level 1 the next one
  // waits on disk while the trainer trains the current one, so each is read as it appears
  const seen = new Map<number, StepBatch>();
  const run = rlx(["train", path]);
  const look = () => {
    for (let step = 1; step <= STEPS; step++) {
      const file = join(runDir, "batches", `step_${step}.bin`);
      if (seen.has(step) || !existsSync(file)) continue;
      try {
        seen.set(step, decodeStepBatch(readFileSync(file), file));
      } catch {
        // removed between the check and the read: the trainer got there first
      }
    }
    return false;
  };
  await untilWhileRunning(run, look, 120_000, "the run's end").catch(() => undefined);
  const { code, err } = await run.done;
  expect(err).not.toContain("error:");
  expect(code).toBe(0);
  expect(seen.size).toBeGreaterThan(0);
  const losses = [rlLoss({ constant: MAX_TOKENS }), rlLoss({ type: "gspo", constant: MAX_TOKENS })];
  let bSamples = 0;
  for (const batch of seen.values()) {
    expect(batch.packed.losses).toEqual(losses);
    for (const row of batch.packed.rows) {
      const codeAt = new Map<number, number>();
      let start = 0;
      row.sampleLengths.forEach((n, i) => (codeAt.set(start, row.sampleLosses?.[i] ?? 0), (start += n)));
      for (const s of row.samples) {
        expect(codeAt.get(s.start)).toBe(s.env === "b" ? 1 : 0);
        if (s.env === "b") bSamples++;
      }
      if (row.samples.every((s) => s.env === "a")) expect(row.sampleLosses).toBeUndefined();
    }
  }
  expect(bSamples).toBeGreaterThan(0);
  const metrics = readMetrics(runDir);
  expect(metrics.length).toBe(STEPS);
  for (const row of metrics) {
    expect(Number.isFinite(row["loss"])).toBe(true);
    expect(Number.isFinite(row["optim/grad_norm"])).toBe(true);
  }
}, 180_000);

/** A deterministic run's published weights, one digest per step. */
async function weightsOf(name: string, body: string): Promise<string[]> {
  const { path, runDir } = writeConfig(ws, name, body);
  const { code, err } = await rlx(["train", path]).done;
  expect(err).not.toContain("error:");
  expect(code).toBe(0);
  return Array.from({ length: STEPS }, (_, i) => digest(join(runDir, "weights", `step_${i + 1}`, "model.safetensors")));
}

test("a loss named in [trainer.loss] or in every env's algo trains bit-identical weights", async () => {
  const loss = `{ type = "tis", is_cap = 3, kl_tau = 0.01 }`;
  const head = runHead(true) + orchestrator(0);
  const byTrainer = await weightsOf(
    "by_trainer",
    `${head}[trainer.loss]\ntype = "tis"\nis_cap = 3\nkl_tau = 0.01\n${envBlock(ws, "a")}${envBlock(ws, "b", `{ type = "max_rl" }`)}`,
  );
  const byEnv = await weightsOf(
    "by_env",
    head +
      envBlock(ws, "a", `{ type = "grpo", loss = ${loss} }`) +
      envBlock(ws, "b", `{ type = "max_rl", loss = ${loss} }`),
  );
  expect(new Set(byTrainer).size).toBe(STEPS); // every step changed the weights
  expect(byEnv).toEqual(byTrainer);
}, 180_000);
