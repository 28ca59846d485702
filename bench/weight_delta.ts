// How much of a step's bf16 weights a training step changes, and whether its delta compresses
// enough to matter when weights are published on disk (docs/engines.md, "Sending less").
//
//   bun bench/weight_delta.ts [--presets small] [--lrs 1e-6,1e-5] [--steps 4] [--tokens 512] [--json FILE]
//
// Each preset and learning rate trains a fresh float32 model (seed 0) with AdamW (weight decay
// 0.01, clipping at 1) on one packed row of random tokens with a cross-entropy term on every
// action token, and after each step takes the weights as bf16 (what a bf16 server loads) and
// compares them with the step before: the share of elements and of tensors whose bytes changed
// (transfer_delta = "tensors" sends the latter), and the bytes of the whole bf16 model and of the
// XOR of the two steps, each raw and gzipped (level 1, node:zlib), with the gzip time. Step 1
// counts from the starting weights. The figures are the medians over steps 2..N.
import { writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { cpus } from "node:os";
import { PRESETS } from "../src/model/presets.ts";
import { loadNative } from "../src/native/ffi.ts";
import { NativeModel } from "../src/native/model.ts";
import { NativeOptimizer, trainStep } from "../src/native/train.ts";
import type { TrainRow } from "../src/data/train_row.ts";
import { flag, median, printTable } from "./_reference.ts";

const presets = flag("presets", "small").split(",");
const lrs = flag("lrs", "1e-6,1e-5").split(",").map(Number);
const steps = Number(flag("steps", "4"));
const tokens = Number(flag("tokens", "512"));
const jsonOut = flag("json", "");

/** Eight samples of random tokens, the second half of each an action trained by cross-entropy. */
function sftRow(vocab: number, seed: number): TrainRow {
  let state = seed >>> 0;
  const rand = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  const n = tokens / 8;
  const row: TrainRow = {
    tokenIds: Int32Array.from({ length: tokens }, () => Math.floor(rand() * vocab)),
    sampleLengths: new Int32Array(8).fill(n),
    lossMask: new Uint8Array(tokens),
    advantages: new Float32Array(tokens),
    inferenceLogprobs: new Float32Array(tokens),
    temperatures: new Float32Array(tokens).fill(1),
    rlWeights: new Float32Array(tokens),
    ceWeights: new Float32Array(tokens),
  };
  for (let t = 0; t < tokens; t++)
    if (t % n >= n / 2) {
      row.lossMask[t] = 1;
      row.ceWeights![t] = 1;
    }
  return row;
}

/** Every parameter as bf16 bytes, in the model's order. */
const bf16 = (m: NativeModel) => m.params().map((p) => m.getParam(p.name, "bf16"));

function compare(before: Uint8Array[], after: Uint8Array[]) {
  let elements = 0;
  let changedElements = 0;
  let changedTensors = 0;
  let changedTensorBytes = 0;
  const whole = Buffer.concat(after);
  const xor = Buffer.alloc(whole.length);
  let at = 0;
  after.forEach((t, i) => {
    const a = new Uint16Array(before[i]!.buffer, before[i]!.byteOffset, before[i]!.byteLength / 2);
    const b = new Uint16Array(t.buffer, t.byteOffset, t.byteLength / 2);
    let changed = 0;
    for (let k = 0; k < b.length; k++) if (a[k] !== b[k]) changed++;
    for (let k = 0; k < t.byteLength; k++) xor[at + k] = before[i]![k]! ^ t[k]!;
    at += t.byteLength;
    elements += b.length;
    changedElements += changed;
    if (changed > 0) (changedTensors++, (changedTensorBytes += t.byteLength));
  });
  const timed = (data: Buffer) => {
    const t0 = performance.now();
    const bytes = gzipSync(data, { level: 1 }).length;
    return { bytes, seconds: (performance.now() - t0) / 1000 };
  };
  const gzWhole = timed(whole);
  const gzXor = timed(xor);
  return {
    elements_changed: changedElements / elements,
    tensors_changed: changedTensors / after.length,
    bytes: whole.length,
    changed_tensor_bytes: changedTensorBytes,
    gzip_whole_bytes: gzWhole.bytes,
    gzip_xor_bytes: gzXor.bytes,
    gzip_whole_s: gzWhole.seconds,
    gzip_xor_s: gzXor.seconds,
  };
}

await loadNative(Number(process.env.RLX_THREADS ?? cpus().length));
const rows: Record<string, number | string>[] = [];
for (const preset of presets) {
  for (const lr of lrs) {
    const model = await NativeModel.create(PRESETS[preset]!.config.shim, { dtype: "f32", seed: 0 });
    const optim = NativeOptimizer.create(model);
    const row = sftRow(model.config.vocab_size, 1);
    const counts = { nRl: 1, nCe: tokens / 2, nRefKl: 1 };
    let before = bf16(model);
    const perStep = [];
    for (let s = 1; s <= steps; s++) {
      trainStep(model, row, counts);
      optim.step(lr, 1.0);
      const after = bf16(model);
      perStep.push(compare(before, after));
      before = after;
      process.stderr.write(`${preset} lr ${lr} step ${s}\n`);
    }
    optim.free();
    model.free();
    const later = perStep.slice(1);
    const med = (key: keyof (typeof later)[0]) => median(later.map((r) => r[key] as number));
    rows.push({
      preset,
      lr,
      elements_changed: med("elements_changed"),
      tensors_changed: med("tensors_changed"),
      bytes: med("bytes"),
      changed_tensor_bytes: med("changed_tensor_bytes"),
      gzip_whole_bytes: med("gzip_whole_bytes"),
      gzip_xor_bytes: med("gzip_xor_bytes"),
      gzip_whole_s: med("gzip_whole_s"),
      gzip_xor_s: med("gzip_xor_s"),
    });
  }
}

const mib = (n: number | string) => (Number(n) / 2 ** 20).toFixed(1);
const pct = (n: number | string) => `${(Number(n) * 100).toFixed(2)}%`;
printTable([
  [
    "preset",
    "lr",
    "elements changed",
    "tensors changed",
    "their MiB",
    "bf16 MiB",
    "gzip MiB",
    "XOR gzip MiB",
    "XOR/bf16",
    "gzip s",
  ],
  ...rows.map((r) => [
    r.preset!,
    r.lr!,
    pct(r.elements_changed!),
    pct(r.tensors_changed!),
    mib(r.changed_tensor_bytes!),
    mib(r.bytes!),
    mib(r.gzip_whole_bytes!),
    mib(r.gzip_xor_bytes!),
    (Number(r.gzip_xor_bytes) / Number(r.bytes)).toFixed(3),
    Number(r.gzip_xor_s).toFixed(2),
  ]),
]);
console.log(`cpu: ${cpus()[0]?.model}, ${cpus().length} cores; medians over steps 2..${steps}`);
if (jsonOut) writeFileSync(jsonOut, `${JSON.stringify({ cpu: cpus()[0]?.model, steps, tokens, rows }, null, 2)}\n`);
