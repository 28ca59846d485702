// Decode throughput: rlx's generator (preallocated KV cache, batched decode, seeded sampling)
// against a PyTorch-eager KV-cache loop of the same model (bench/reference/generate.py), for
// batch 1, 16 and 64, side by side in one command.
//
//   bun bench/generate.ts [--presets tiny] [--batches 1,16,64] [--prompt 32] [--new 64] [--rounds 3] [--threads N] [--group 8] [--blas]
//
// Both sides: B prompts of equal length, one prefill (timed apart, with the first token), then
// new - 1 decode steps of one forward and one temperature-1 sample per sequence; decode tok/s is
// B * (new - 1) / decode seconds. Rounds alternate python and rlx (this machine's speed drifts);
// each figure is the median over rounds. A last column times rlx's prefill when the B prompts come
// in groups of --group (default 8) equal prompts, as an RL step's do: each is prefilled once.
// --blas adds rlx with the cpu_linear option off (every product through BLAS, as before
// native/src/linear_cpu.cpp), in the same rounds.
import { cpus } from "node:os";
import { PRESETS } from "../src/model/presets.ts";
import { NativeGenerator } from "../src/native/generate.ts";
import { NativeModel, shimConfigJson } from "../src/native/model.ts";
import { loadNative } from "../src/native/ffi.ts";
import { runtimeInfo } from "../src/native/runtime.ts";
import { flag, median, printTable, runReference } from "./_reference.ts";

interface Timing {
  prefill: number;
  decode: number;
}

function rlxGenerate(
  model: NativeModel,
  batch: number,
  promptLength: number,
  newTokens: number,
  seed: number,
  group = 1,
): Timing {
  const prompts = Array.from({ length: batch }, (_, b) =>
    Int32Array.from({ length: promptLength }, (_, i) => (Math.floor(b / group) * 31 + i * 7) % 259),
  );
  using gen = NativeGenerator.create(model, { slots: batch, capacity: promptLength + newTokens });
  const t0 = performance.now();
  const first = gen.add(
    prompts.map((prompt, b) => ({ prompt, sampling: { temperature: 1, maxNewTokens: newTokens, seed: seed + b } })),
  );
  const t1 = performance.now();
  let produced = first.length;
  for (let i = 0; i < newTokens - 1; i++) produced += gen.step().length;
  const t2 = performance.now();
  if (produced !== batch * newTokens) throw new Error(`rlx produced ${produced} tokens, expected ${batch * newTokens}`);
  return { prefill: (t1 - t0) / 1000, decode: (t2 - t1) / 1000 };
}

const presets = flag("presets", "tiny").split(",");
const batches = flag("batches", "1,16,64").split(",").map(Number);
const promptLength = Number(flag("prompt", "32"));
const newTokens = Number(flag("new", "64"));
const rounds = Number(flag("rounds", "3"));
const group = Number(flag("group", "8"));
const blas = process.argv.includes("--blas");
// Both sides use the same intra-op thread count (default: one per core).
const threads = Number(flag("threads", String(cpus().length)));
await loadNative(threads);
const info = await runtimeInfo();
// OpenMP's wait policy decides much of a small step's time (experiments/bench_history.md, "Decode on the CPU"):
// rlx waits passively unless told otherwise (src/native/ffi.ts); the reference inherits this
// environment, where an unset policy is libgomp's default spin.
const waits = (policy: string | undefined) =>
  [policy, process.env.GOMP_SPINCOUNT && `GOMP_SPINCOUNT=${process.env.GOMP_SPINCOUNT}`].filter(Boolean).join(", ") ||
  "libgomp's default spin";
console.log(
  `libtorch ${info.torch_version}, BLAS ${info.blas}, ${info.threads} threads; prompt ${promptLength}, ${newTokens} new tokens, ${rounds} rounds\n` +
    `OpenMP waits: rlx ${waits(info.omp_wait_policy)}; torch ${waits(process.env.OMP_WAIT_POLICY)}\n`,
);

const table: (string | number)[][] = [
  [
    "preset",
    "batch",
    "rlx prefill ms",
    "torch prefill ms",
    "rlx decode tok/s",
    "torch decode tok/s",
    "rlx/torch",
    `rlx prefill ms, groups of ${group}`,
    ...(blas ? ["BLAS products: rlx prefill ms", "decode tok/s"] : []),
  ],
];
for (const name of presets) {
  const preset = PRESETS[name];
  if (!preset) throw new Error(`unknown preset ${name}`);
  using model = await NativeModel.create(preset.config.shim, { seed: 0 });
  for (const batch of batches) {
    rlxGenerate(model, batch, promptLength, 4, 0); // warm-up
    const ours: Timing[] = [];
    const theirs: Timing[] = [];
    const grouped: Timing[] = [];
    const viaBlas: Timing[] = [];
    for (let r = 0; r < rounds; r++) {
      const ref = runReference<{ prefill_s: number; decode_s: number }>("generate.py", [
        "--config",
        shimConfigJson(preset.config.shim),
        "--batch",
        String(batch),
        "--prompt",
        String(promptLength),
        "--new",
        String(newTokens),
        "--repeats",
        "1",
        "--threads",
        String(threads),
      ]);
      theirs.push({ prefill: ref.prefill_s, decode: ref.decode_s });
      // warm, as the reference is: it times its run right after a warm-up in its own process,
      // while this process's threads slept through the reference's run
      rlxGenerate(model, batch, promptLength, 4, r);
      ours.push(rlxGenerate(model, batch, promptLength, newTokens, r));
      grouped.push(rlxGenerate(model, batch, promptLength, 2, r, group));
      if (blas) {
        model.setOption("cpu_linear", false);
        rlxGenerate(model, batch, promptLength, 4, r);
        viaBlas.push(rlxGenerate(model, batch, promptLength, newTokens, r));
        model.setOption("cpu_linear", true);
      }
    }
    const decodeTokens = batch * (newTokens - 1);
    const rlxDecode = median(ours.map((t) => t.decode));
    const torchDecode = median(theirs.map((t) => t.decode));
    table.push([
      name,
      batch,
      (median(ours.map((t) => t.prefill)) * 1000).toFixed(1),
      (median(theirs.map((t) => t.prefill)) * 1000).toFixed(1),
      (decodeTokens / rlxDecode).toFixed(0),
      (decodeTokens / torchDecode).toFixed(0),
      (torchDecode / rlxDecode).toFixed(2),
      (median(grouped.map((t) => t.prefill)) * 1000).toFixed(1),
      ...(blas
        ? [
            (median(viaBlas.map((t) => t.prefill)) * 1000).toFixed(1),
            (decodeTokens / median(viaBlas.map((t) => t.decode))).toFixed(0),
          ]
        : []),
    ]);
  }
}
printTable(table);
