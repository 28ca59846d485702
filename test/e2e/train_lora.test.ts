// `rlx train` with [model.lora] (docs/lora.md), as a real process with its spawned policy server:
// every published step and checkpoint is an adapter in PEFT's layout (no full weights), the base
// model's files are untouched, the optimizer state covers the adapters only, the policy follows the
// published adapters; killed after checkpoint 2 and resumed, the run finishes from the adapter
// checkpoint; and a resume under another [model.lora] is refused naming the key.
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS } from "../../src/model/adapter.ts";
import { loadModel } from "../../src/model/hf.ts";
import { score } from "../../src/native/generate.ts";
import { processesMentioning, readMetrics, rlx, until, untilWhileRunning, sharedWorkspace } from "./train_helpers.ts";

const ws = sharedWorkspace();

function config(name: string, lora: string): { path: string; runDir: string } {
  const runDir = join(ws.dir, name);
  const path = join(ws.dir, `${name}.toml`);
  writeFileSync(
    path,
    `output_dir = ${JSON.stringify(runDir)}
max_steps = 4
seed = 2
[model]
path = ${JSON.stringify(ws.model)}
[model.lora]
${lora}
[trainer.optim]
lr = 1e-2
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 128
max_tokens = 8
[ckpt]
interval = 2
keep = 2
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
`,
  );
  return { path, runDir };
}

test("published steps and checkpoints are PEFT adapters; the base is untouched; kill and resume finish the run", async () => {
  const baseBytes = readFileSync(join(ws.model, "model.safetensors"));
  const { path, runDir } = config("lora", "rank = 4\nalpha = 8\nmerged = true");
  const first = rlx(["train", path]);
  const checkpoint2 = join(runDir, "checkpoints/step_2/manifest.json");
  await untilWhileRunning(first, () => existsSync(checkpoint2), 120_000, "checkpoint 2");
  first.proc.kill("SIGKILL");
  await first.done;
  await until(() => processesMentioning(runDir).length === 0, 30_000, "no process of the run left", 50);

  const { code, err } = await rlx(["train", path, "--resume"]).done;
  expect(err).not.toContain("rror");
  expect(code).toBe(0);
  expect(readMetrics(runDir).map((row) => row.step)).toEqual([1, 2, 3, 4]);

  const step4 = join(runDir, "weights/step_4");
  const files = readdirSync(step4).sort();
  expect(files).toContain(ADAPTER_WEIGHTS);
  expect(files).toContain(ADAPTER_CONFIG);
  expect(files).not.toContain("model.safetensors");
  expect(files).toContain("merged"); // merged = true: full weights beside the adapter
  expect(existsSync(join(step4, "merged/model.safetensors"))).toBe(true);
  expect(statSync(join(step4, ADAPTER_WEIGHTS)).size).toBeLessThan(baseBytes.byteLength / 4);
  expect(JSON.parse(readFileSync(join(step4, ADAPTER_CONFIG), "utf8"))).toMatchObject({
    r: 4,
    lora_alpha: 8,
    base_model_name_or_path: ws.model,
    peft_type: "LORA",
  });
  const ckptModel = join(runDir, "checkpoints/step_4/trainer/model");
  expect(existsSync(join(ckptModel, ADAPTER_WEIGHTS))).toBe(true);
  expect(existsSync(join(ckptModel, "model.safetensors"))).toBe(false);

  // the base's files are byte-identical; the adapter trained (B moved off zero)
  expect(Buffer.compare(readFileSync(join(ws.model, "model.safetensors")), baseBytes)).toBe(0);
  using adapted = await loadModel(step4);
  using base = await loadModel(ws.model);
  using merged = await loadModel(join(step4, "merged"));
  const seq = [[1, 30, 31, 32, 33, 34, 35]];
  const [a, b, m] = [score(adapted, seq), score(base, seq), score(merged, seq)].map((s) => s.logprobs[0]!);
  expect(Math.max(...a!.map((x, i) => Math.abs(x - b![i]!)))).toBeGreaterThan(1e-5);
  expect(Math.max(...a!.map((x, i) => Math.abs(x - m![i]!)))).toBeLessThan(1e-4);
  // the optimizer state holds the adapters' moments only: 32 + per tensor 8 + 8 x numel bytes
  const numel = adapted.loraParams().reduce((n, p) => n + p.shape.reduce((x, y) => x * y, 1), 0);
  expect(statSync(join(runDir, "checkpoints/step_4/trainer/optimizer.bin")).size).toBe(
    32 + 8 * adapted.loraParams().length + 8 * numel,
  );
}, 300_000);

test("resuming under another [model.lora] is refused, naming the key", async () => {
  const { path, runDir } = config("lora-change", "rank = 4\nalpha = 8");
  const { code } = await rlx(["train", path]).done;
  expect(code).toBe(0);
  writeFileSync(
    path,
    readFileSync(path, "utf8").replace("rank = 4", "rank = 8").replace("max_steps = 4", "max_steps = 6"),
  );
  const resumed = await rlx(["train", path, "--resume"]).done;
  expect(resumed.code).not.toBe(0);
  expect(resumed.err).toContain(
    "[model.lora] differs from the adapter the model directory or checkpoint holds (rank 4",
  );
  expect(existsSync(runDir)).toBe(true);
}, 300_000);
