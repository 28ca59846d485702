// What checksums cost a checkpoint (the limit: 10% of the save; docs/run-directory.md): a `small`-preset
// checkpoint (float32 weights and AdamW state, as the trainer writes it) saved with
// writeCheckpoint, against the CRC-32 work that save does inside it, measured on the same bytes in
// the same rounds: per tensor (for naming a damaged one) and chained per file, and the optimizer
// image (the small files read back, config and tokenizer, are a few KiB). Also the verification on resume (checkCheckpoint reads every
// file) against a plain read of the same files.
//
//   bun bench/checksum.ts [--preset small] [--rounds 5] [--dir DIR]
//
// Rounds alternate save and hash work because this machine's speed drifts; figures are medians.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { crc32 } from "../src/model/checksums.ts";
import { loadModel } from "../src/model/hf.ts";
import { initModel } from "../src/model/presets.ts";
import { NativeOptimizer } from "../src/native/train.ts";
import { checkCheckpoint, writeCheckpoint } from "../src/rundir/checkpoint.ts";
import { checkpointDir } from "../src/rundir/paths.ts";
import { flag, median } from "./_reference.ts";

const preset = flag("preset", "small");
const rounds = Number(flag("rounds", "5"));
const root = mkdtempSync(join(flag("dir", tmpdir()), "rlx-bench-ckpt-"));
const source = join(root, "source");
await initModel({ preset, out: source, seed: 0, dtype: "f32" });
using model = await loadModel(source);
using optimizer = NativeOptimizer.create(model);
// one optimizer step with every gradient zero allocates the moments, as after any training step
optimizer.step(1e-4, 0);
const image = optimizer.saveState();

// the bytes the save writes, fetched once: the save fetches them anyway, the hash is what it adds
const tensors = model.params().map(({ name }) => model.getParam(name, "f32"));
const bytes = tensors.reduce((n, t) => n + t.byteLength, image.byteLength);

/** The CRC-32 work writeCheckpoint adds: twice over each tensor (chained per file, and alone), once over the optimizer image. */
function hashWork(): number {
  let crc = 0;
  for (const data of tensors) {
    crc = crc32(data, crc);
    crc32(data);
  }
  return crc32(image, crc);
}

const time = (fn: () => unknown) => {
  const start = performance.now();
  fn();
  return (performance.now() - start) / 1000;
};
const saves: number[] = [];
const hashes: number[] = [];
const verifies: number[] = [];
const reads: number[] = [];
for (let round = 0; round < rounds; round++) {
  saves.push(
    time(() =>
      writeCheckpoint(root, round + 1, { model, optimizer, sourceDir: source, orchestratorState: {}, keep: 1 }),
    ),
  );
  hashes.push(time(hashWork));
  const dir = checkpointDir(root, round + 1);
  verifies.push(time(() => checkCheckpoint(dir)));
  reads.push(
    time(() => {
      for (const file of ["trainer/model/model.safetensors", "trainer/optimizer.bin", "orchestrator.json"])
        readFileSync(join(dir, file));
    }),
  );
}
const save = median(saves);
const hash = median(hashes);
console.log(
  `${preset}: checkpoint ${(bytes / 2 ** 20).toFixed(0)} MiB (weights + AdamW image ${(image.byteLength / 2 ** 20).toFixed(0)} MiB); ${cpus()[0]?.model}; load ${loadavg()
    .map((x) => x.toFixed(2))
    .join(" ")}`,
);
console.log(
  `save (writeCheckpoint, checksums included) ${save.toFixed(3)} s; its CRC-32 work ${hash.toFixed(3)} s = ${((100 * hash) / save).toFixed(1)}% of the save`,
);
console.log(
  `verify on resume (checkCheckpoint) ${median(verifies).toFixed(3)} s; a plain read of the same files ${median(reads).toFixed(3)} s`,
);
rmSync(root, { recursive: true, force: true });
