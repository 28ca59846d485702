// A checkpoint damaged on disk (docs/run-directory.md, "Integrity"): 64 bytes flipped in the middle of
// checkpoints/step_4/trainer/model/model.safetensors (size unchanged) after a finished run. `rlx
// check` names the file and the tensor offline; `rlx train --resume` warns with the same words,
// continues from the whole checkpoint before it (step 2), and the run ends with every step logged
// once. Before checksums the resume took the damaged weights without a word.
import { expect, test } from "bun:test";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readSafetensors } from "../../src/model/safetensors.ts";
import { readMetrics, rlx, writeConfig, sharedWorkspace } from "./train_helpers.ts";

const ws = sharedWorkspace();

test("flipped bytes in a checkpoint's weights: rlx check names them, --resume uses the checkpoint before", async () => {
  const { path, runDir } = writeConfig(
    ws,
    "flipped",
    `max_steps = 4
[orchestrator]
batch_size = 4
group_size = 2
seq_len = 96
max_tokens = 6
filter_zero_advantages = false
[ckpt]
interval = 2
keep = 2
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
`,
  );
  const args = ["train", path, "--inference", "in-process"];
  const first = await rlx(args).done;
  expect(first.code).toBe(0);
  expect((await rlx(["check", runDir]).done).code).toBe(0);

  const weights = join(runDir, "checkpoints/step_4/trainer/model/model.safetensors");
  const bytes = new Uint8Array(readFileSync(weights));
  const at = Math.floor(bytes.length / 2);
  for (let i = at; i < at + 64; i++) bytes[i]! ^= 0xff;
  writeFileSync(weights, bytes);
  expect(statSync(weights).size).toBe(bytes.length);
  const tensor = [...readSafetensors(weights).tensors.values()].find(
    (t) => t.offset <= at && at < t.offset + t.data.byteLength,
  )!.name;
  const named = new RegExp(
    `checkpoints/step_4: trainer/model/model\\.safetensors: checksum mismatch \\(crc32 \\w{8}, written as \\w{8}\\): tensor ${tensor.replaceAll(".", "\\.")}`,
  );

  const check = await rlx(["check", runDir]).done;
  expect(check.code).toBe(1);
  expect(check.out).toMatch(new RegExp(`damaged +${named.source}`));
  expect(check.out).toContain("ok      checkpoints/step_2");

  const resumed = await rlx([...args, "--resume", "--set", "max_steps=5"]).done;
  expect(resumed.code).toBe(0);
  expect(resumed.err).toMatch(
    new RegExp(`ignoring the damaged checkpoint .*${named.source} \\(trying the one before it\\)`),
  );
  const trainerLog = readFileSync(join(runDir, "logs/trainer.log"), "utf8");
  expect(trainerLog).toContain(`${join(runDir, "checkpoints/step_2")}/trainer/model loaded, training steps 3..5`);
  expect(readMetrics(runDir).map((row) => row.step)).toEqual([1, 2, 3, 4, 5]);
  expect((await rlx(["check", runDir]).done).code).toBe(0); // the damaged one was replaced by a fresh step 4
}, 300_000);
