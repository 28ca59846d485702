// Checksums end to end on real files: 64 bytes flipped in the middle of a checkpoint's
// model.safetensors (size unchanged) are caught, naming the file and the tensor, and --resume's
// choice falls back to the checkpoint before; the same damage in published weights makes the load
// fail instead of serving them; a flipped or truncated step file is refused; `rlx check` finds all
// of it offline. A manifest from before checksums (sizes only) still reads.
import { expect, test } from "bun:test";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChecksumError } from "../../../src/errors.ts";
import { loadModel } from "../../../src/model/hf.ts";
import { readSafetensors } from "../../../src/model/safetensors.ts";
import { checkModelDir } from "../../../src/model/integrity.ts";
import { NativeOptimizer } from "../../../src/native/train.ts";
import { checkCheckpoint, latestCheckpoint, readCheckpoint, writeCheckpoint } from "../../../src/rundir/checkpoint.ts";
import { checkpointDir, weightsDir } from "../../../src/rundir/paths.ts";
import { readStepBatch, writeStepBatch } from "../../../src/rundir/step_file.ts";
import { checkRunDir } from "../../../src/rundir/verify.ts";
import { packStep } from "../../../src/data/pack.ts";
import { microModelDir } from "../../fixtures/serve_model.ts";

/** XORs 64 bytes in the middle of a file: same size, different bytes. Returns the offset. */
function flipMiddle(path: string): number {
  const bytes = new Uint8Array(readFileSync(path));
  const at = Math.floor(bytes.length / 2);
  for (let i = at; i < at + 64; i++) bytes[i]! ^= 0xa5;
  writeFileSync(path, bytes);
  return at;
}

/** The tensor whose bytes hold file offset `at`. */
const tensorAt = (path: string, at: number) =>
  [...readSafetensors(path).tensors.values()].find((t) => t.offset <= at && at < t.offset + t.data.byteLength)!.name;

async function runWithCheckpoints(): Promise<string> {
  const run = mkdtempSync(join(tmpdir(), "rlx-integrity-"));
  const source = await microModelDir();
  using model = await loadModel(source);
  using optimizer = NativeOptimizer.create(model);
  for (const step of [2, 4])
    writeCheckpoint(run, step, { model, optimizer, sourceDir: source, orchestratorState: { step }, keep: 3 });
  return run;
}

test("64 bytes flipped mid-file in a checkpoint's weights: named with the tensor, and the one before is used", async () => {
  const run = await runWithCheckpoints();
  const manifest = JSON.parse(readFileSync(join(checkpointDir(run, 4), "manifest.json"), "utf8"));
  expect(manifest.format).toBe(2);
  expect(manifest.files["trainer/optimizer.bin"]).toMatchObject({ crc32: expect.stringMatching(/^[0-9a-f]{8}$/) });
  expect(checkCheckpoint(checkpointDir(run, 4))).toEqual([]);

  const weights = join(checkpointDir(run, 4), "trainer/model/model.safetensors");
  const size = statSync(weights).size;
  const tensor = tensorAt(weights, flipMiddle(weights));
  expect(statSync(weights).size).toBe(size);
  const problems = checkCheckpoint(checkpointDir(run, 4));
  expect(problems).toHaveLength(1);
  expect(problems[0]).toMatch(
    new RegExp(
      `^trainer/model/model\\.safetensors: checksum mismatch \\(crc32 \\w{8}, written as \\w{8}\\): tensor ${tensor}$`,
    ),
  );
  const warnings: string[] = [];
  expect(latestCheckpoint(run, (w) => warnings.push(w))).toEqual({ step: 2, dir: checkpointDir(run, 2) });
  expect(warnings).toHaveLength(1);
  expect(warnings[0]).toContain(
    `ignoring the damaged checkpoint ${checkpointDir(run, 4)}: trainer/model/model.safetensors`,
  );
  expect(warnings[0]).toContain(`tensor ${tensor}`);
  expect(() => readCheckpoint(checkpointDir(run, 4))).toThrow(`tensor ${tensor}`);
  // and `rlx check` says the same offline
  const items = checkRunDir(run);
  expect(items.map((i) => `${i.path} ${i.status}`)).toEqual(["checkpoints/step_2 ok", "checkpoints/step_4 damaged"]);
});

test("damaged optimizer state or orchestrator state is caught by its checksum too", async () => {
  const run = await runWithCheckpoints();
  flipMiddle(join(checkpointDir(run, 4), "trainer/optimizer.bin"));
  writeFileSync(join(checkpointDir(run, 2), "orchestrator.json"), JSON.stringify({ step: 9 })); // same length
  expect(checkCheckpoint(checkpointDir(run, 4))).toEqual([
    expect.stringMatching(/^trainer\/optimizer\.bin: checksum mismatch \(crc32 \w{8}, written as \w{8}\)$/),
  ]);
  expect(checkCheckpoint(checkpointDir(run, 2))).toEqual([
    expect.stringMatching(/^orchestrator\.json: checksum mismatch/),
  ]);
  expect(latestCheckpoint(run, () => {})).toBeUndefined();
});

test("published weights damaged on disk fail to load, naming the file and tensor", async () => {
  const run = mkdtempSync(join(tmpdir(), "rlx-integrity-"));
  const dir = weightsDir(run, 3);
  cpSync(await microModelDir({ seed: 5 }), dir, { recursive: true });
  (await loadModel(dir)).free(); // whole: loads
  const tensor = tensorAt(join(dir, "model.safetensors"), flipMiddle(join(dir, "model.safetensors")));
  const error = await loadModel(dir).catch((err: unknown) => err);
  expect(error).toBeInstanceOf(ChecksumError);
  const written = JSON.parse(readFileSync(join(dir, "checksums.json"), "utf8")).files["model.safetensors"].crc32;
  expect((error as Error).message).toMatch(
    new RegExp(
      `^the model directory ${dir} is damaged: model\\.safetensors: checksum mismatch \\(crc32 \\w{8}, written as ${written}\\): tensor ${tensor}$`,
    ),
  );
  expect(checkRunDir(run)).toEqual([{ path: "weights/step_3", status: "damaged", problems: [expect.any(String)] }]);
  // a model directory without checksums.json (one from the Hub) has nothing to check and loads as before
  const hub = mkdtempSync(join(tmpdir(), "rlx-hub-"));
  cpSync(await microModelDir({ seed: 5 }), hub, { recursive: true });
  rmSync(join(hub, "checksums.json"));
  expect(checkModelDir(hub)).toEqual([]);
  (await loadModel(hub)).free();
});

test("a step file with bytes flipped or cut short is refused by its checksum; rlx check names it", () => {
  const run = mkdtempSync(join(tmpdir(), "rlx-integrity-"));
  const packed = packStep(
    [
      {
        tokenIds: Array.from({ length: 40 }, (_, i) => i % 7),
        lossMask: Array.from({ length: 40 }, (_, i) => (i > 20 ? 1 : 0)),
        advantages: Array(40).fill(0.5),
        inferenceLogprobs: Array(40).fill(-1),
        temperatures: Array(40).fill(1),
        env: "math",
        rolloutId: "r0",
      },
    ],
    { seqLen: 64 },
  );
  const rows = packed.rows.map((row) => ({ ...row, samples: row.samples.map((s) => ({ ...s, policyVersion: 0 })) }));
  const path = join(run, "batches", "step_1.bin");
  mkdirSync(join(run, "batches"));
  writeStepBatch(join(run, "batches", "step_2.bin"), { step: 2, packed: { ...packed, rows } });
  writeStepBatch(path, { step: 1, packed: { ...packed, rows } });
  expect(readStepBatch(path).step).toBe(1);
  const bytes = new Uint8Array(readFileSync(path));
  bytes[bytes.length - 30]! ^= 0x01; // one bit of an advantage
  writeFileSync(path, bytes);
  expect(() => readStepBatch(path)).toThrow(ChecksumError);
  expect(() => readStepBatch(path)).toThrow(`${path}: checksum mismatch`);
  writeFileSync(path, bytes.subarray(0, bytes.length - 100));
  expect(() => readStepBatch(path)).toThrow(/truncated or damaged after it was written/);
  expect(checkRunDir(run).map((i) => `${i.path} ${i.status}`)).toEqual([
    "batches/step_1.bin damaged",
    "batches/step_2.bin ok",
  ]);
});
