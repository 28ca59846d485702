// `deterministic = true`: two runs of the same config, from a fresh random model with a dense
// reward (the letters env), give bit-identical weights at every published step and identical
// metrics on every key but timings. The runs must also have trained (weights move, rewards vary),
// or equality would prove nothing.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { readMetrics, rlx, type Workspace, workspace, writeConfig } from "./train_helpers.ts";

let ws: Workspace;
beforeAll(async () => {
  ws = await workspace();
});
afterAll(() => rmSync(ws.dir, { recursive: true, force: true }));

const STEPS = 3;
const digest = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");
const timing = (key: string) => key === "time" || key.startsWith("time/") || key.startsWith("throughput/");

async function run(name: string): Promise<{ weights: string[]; metrics: Record<string, number>[] }> {
  const { path, runDir } = writeConfig(
    ws,
    name,
    `max_steps = ${STEPS}
deterministic = true
[trainer.optim]
lr = 3e-3
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 128
max_tokens = 12
max_async_level = 0
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
  const { code, err } = await rlx(["train", path]).done;
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
