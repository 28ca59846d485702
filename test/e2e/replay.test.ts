// `rlx replay --gradient` on a run of two sharded trainer ranks (shard "full") that kept its step
// files (ckpt.keep_steps): every step's update comes back bit for bit, from the newest checkpoint
// before it and from the start (the latter with the run's config saying a launcher started its
// ranks on other nodes: replay starts them all here); one element perturbed in the recorded weights of step 2 is
// reported at step 2, in that tensor, with exit code 1; a step file that is gone is an error
// naming it and the setting.
import { expect, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { GradientReplay } from "../../src/replay/gradient.ts";
import { perturbFirstElement, rlx, sharedWorkspace, writeConfig } from "./train_helpers.ts";

const ws = sharedWorkspace();
const TENSOR = "model.layers.0.mlp.down_proj.weight";

async function replay(runDir: string, step: number): Promise<{ code: number; result?: GradientReplay; err: string }> {
  const done = await rlx(["replay", runDir, "--step", String(step), "--gradient", "--json"]).done;
  return { code: done.code, err: done.err, ...(done.out.trim() ? { result: JSON.parse(done.out) } : {}) };
}

test("two sharded ranks' steps replay bit for bit; a perturbed weight is found at its step and tensor", async () => {
  const { path, runDir } = writeConfig(
    ws,
    "replay",
    `max_steps = 3
[trainer]
world_size = 2
shard = "full"
threads = 1
[trainer.optim]
lr = 3e-3
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 256
max_tokens = 8
max_async_level = 1
[ckpt]
interval = 1
keep = 5
keep_steps = true
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
`,
  );
  expect((await rlx(["train", path, "--inference", "in-process"]).done).code).toBe(0);

  const fromCheckpoint = await replay(runDir, 3);
  expect(fromCheckpoint.code).toBe(0);
  expect(fromCheckpoint.result!.from).toBe(2);
  expect(fromCheckpoint.result!.ranks).toBe(2);
  expect(fromCheckpoint.result!.steps.map((s) => [s.step, s.comparison.differing.length])).toEqual([[3, 0]]);

  // a run whose ranks a launcher spread over nodes replays with every rank here
  const configPath = join(runDir, "config.resolved.toml");
  const spread = readFileSync(configPath, "utf8")
    .replace('launcher = "rlx"', 'launcher = "external"')
    .replace('master_addr = "127.0.0.1"', 'master_addr = "10.9.9.9"');
  expect(spread).toContain('launcher = "external"');
  writeFileSync(configPath, spread);
  rmSync(join(runDir, "checkpoints"), { recursive: true });
  const fromStart = await replay(runDir, 3);
  expect(fromStart.code).toBe(0);
  expect(fromStart.result!.from).toBe(0);
  for (const s of fromStart.result!.steps) expect(s.comparison.identical).toBe(s.comparison.tensors);
  expect(fromStart.result!.steps.map((s) => s.step)).toEqual([1, 2, 3]);

  perturbFirstElement(join(runDir, "weights/step_2/model.safetensors"), TENSOR, 1e-3);
  const perturbed = await replay(runDir, 3);
  expect(perturbed.code).toBe(1);
  expect(perturbed.result!.firstDiffering).toBe(2);
  const step2 = perturbed.result!.steps.find((s) => s.step === 2)!.comparison;
  expect(step2.differing).toEqual([
    { name: TENSOR, maxAbsDiff: expect.closeTo(1e-3, 6), differing: 1, elements: expect.any(Number) },
  ]);
  expect(perturbed.result!.steps.find((s) => s.step === 3)!.comparison.differing).toEqual([]);

  rmSync(join(runDir, "batches/step_2.bin"));
  const gone = await replay(runDir, 3);
  expect(gone.code).not.toBe(0);
  expect(gone.err).toContain("batches/step_2.bin is gone");
  expect(gone.err).toContain("ckpt.keep_steps = true");
});
