// Training-step throughput: rlx against a PyTorch-eager reference of the same model and loss
// (bench/reference/train_step.py), side by side in one command, on the `tiny` and `small` presets
// with one 4096-token packed micro-batch per step.
//
//   bun bench/train_step.ts [--presets tiny,small] [--rounds 3] [--steps 3] [--autocast] [--threads N]
//                           [--device cpu|cuda] [--tokens 4096] [--peak-tflops X] [--json FILE]
//
// --device cuda runs both sides on the GPU (the reference then needs a CUDA python torch:
// RLX_BENCH_PYTHON); --tokens scales the row's sample lengths to that many tokens (16384 for the
// GPU check, scripts/gpu_check.sh). The utilization column is achieved FLOP/s over --peak-tflops
// when given (MFU: an H200's dense bf16 peak is 989), else over the measured f32 matmul ceiling.
// --json writes the table's numbers as one JSON object.
// --autocast runs both sides under bf16 autocast (rlx model option autocast_bf16; torch.autocast).
// A step is forward, the three-component loss, backward, grad-norm clipping and AdamW. The two
// sides alternate in rounds (python, rlx, python, rlx, ...) because this machine's speed drifts by
// ±25 % over minutes; each side's figure is the median step time over all its rounds. Achieved
// FLOP/s counts 6 * P * N for the matmul parameters (not the embedding lookup) plus attention
// (QK^T and AV over each sample's n x n block, forward and backward: 12 * heads * head_dim * n^2
// per layer), as a fraction of the measured float32 matmul ceiling (benchMatmul, 2048^2).
import { cpus } from "node:os";
import { countParams, PRESETS } from "../src/model/presets.ts";
import { type ShimModelConfig, NativeModel, shimConfigJson } from "../src/native/model.ts";
import { loadNative } from "../src/native/ffi.ts";
import { benchMatmul, runtimeInfo } from "../src/native/runtime.ts";
import { NativeOptimizer, trainStep } from "../src/native/train.ts";
import { flag, median, printTable, runReference } from "./_reference.ts";
import type { TrainRow } from "../src/data/train_row.ts";

// Sample lengths of the packed row: a realistic mix summing to 4096 (scaled by --tokens).
const LENGTHS = [700, 300, 512, 1024, 128, 900, 532];

/** LENGTHS scaled to `tokens` in all (the last sample takes the rounding). */
function scaledLengths(tokens: number): number[] {
  const base = LENGTHS.reduce((a, b) => a + b, 0);
  const lengths = LENGTHS.map((n) => Math.max(2, Math.round((n * tokens) / base)));
  lengths[lengths.length - 1]! += tokens - lengths.reduce((a, b) => a + b, 0);
  return lengths;
}

/** The row, with streams marked by the reference's rules (make_batch): actions are the second half
 * of each sample; samples cycle rl, rl + ce (weight 0.1), ref_kl. */
function makeRow(lengths: number[], seed: number): TrainRow {
  let state = seed >>> 0;
  const rand = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  const T = lengths.reduce((a, b) => a + b, 0);
  const row: TrainRow = {
    tokenIds: Int32Array.from({ length: T }, () => Math.floor(rand() * 259)),
    sampleLengths: Int32Array.from(lengths),
    lossMask: new Uint8Array(T),
    advantages: new Float32Array(T),
    inferenceLogprobs: Float32Array.from({ length: T }, () => -rand() * 3 - 2),
    temperatures: new Float32Array(T).fill(1),
    refLogprobs: Float32Array.from({ length: T }, () => -rand() * 3 - 2),
    rlWeights: new Float32Array(T),
    ceWeights: new Float32Array(T),
    refKlWeights: new Float32Array(T),
  };
  let start = 0;
  lengths.forEach((n, s) => {
    const adv = rand() - 0.5;
    for (let i = Math.floor(n / 2); i < n; i++) {
      const t = start + i;
      row.lossMask[t] = 1;
      row.advantages[t] = adv;
      if (s % 3 !== 2) row.rlWeights![t] = 1;
      if (s % 3 === 1) row.ceWeights![t] = 0.1;
      if (s % 3 === 2) row.refKlWeights![t] = 1;
    }
    start += n;
  });
  return row;
}

function stepFlops(c: ShimModelConfig, lengths: number[]): number {
  const h = c.hidden_size;
  const q = c.num_attention_heads * c.head_dim;
  const kv = c.num_key_value_heads * c.head_dim;
  const perLayer = 2 * h * q + 2 * h * kv + 3 * h * c.intermediate_size;
  const matmulParams = c.num_hidden_layers * perLayer + c.vocab_size * h;
  const N = lengths.reduce((a, b) => a + b, 0);
  const attention = 12 * c.num_hidden_layers * q * lengths.reduce((sum, n) => sum + n * n, 0);
  return 6 * matmulParams * N + attention;
}

async function rlxRound(
  model: NativeModel,
  optim: NativeOptimizer,
  row: TrainRow,
  steps: number,
): Promise<{ times: number[]; loss: number }> {
  const counts = { nRl: 0, nCe: 0, nRefKl: 0 };
  for (let t = 0; t < row.tokenIds.length; t++) {
    if (row.lossMask[t] && row.rlWeights![t]) counts.nRl++;
    if (row.ceWeights![t]) counts.nCe++;
    if (row.refKlWeights![t]) counts.nRefKl++;
  }
  const times: number[] = [];
  let loss = Number.NaN;
  for (let i = 0; i < steps; i++) {
    const t0 = performance.now();
    loss = trainStep(model, row, counts).all.loss;
    optim.step(1e-5, 1.0);
    times.push((performance.now() - t0) / 1000);
  }
  return { times, loss };
}

interface ReferenceResult {
  step_s: number[];
  losses: number[];
  threads: number;
}

const presets = flag("presets", "tiny,small").split(",");
const rounds = Number(flag("rounds", "3"));
const steps = Number(flag("steps", "3"));
// Both sides use the same intra-op thread count (default: one per core).
const threads = Number(flag("threads", String(cpus().length)));
await loadNative(threads);
const autocast = process.argv.includes("--autocast");
const device = flag("device", "cpu");
const lengths = scaledLengths(Number(flag("tokens", "4096")));
const peakTflops = Number(flag("peak-tflops", "0"));
const jsonOut = flag("json", "");
const info = await runtimeInfo();
const ceiling = peakTflops > 0 ? peakTflops * 1000 : await benchMatmul(2048, 5);
console.log(
  `libtorch ${info.torch_version}, ${device}, BLAS ${info.blas}, ${info.threads} threads; ${peakTflops > 0 ? `peak ${peakTflops} TFLOP/s (given)` : `matmul ceiling ${ceiling.toFixed(0)} GFLOP/s (f32 2048^2)`}`,
);
console.log(
  `${autocast ? "bf16 autocast" : "float32"}; one packed row of ${lengths.length} samples, ${lengths.reduce((a, b) => a + b, 0)} tokens; ${rounds} rounds x ${steps} steps per side\n`,
);
const results: Record<string, Record<string, number>> = {};

const table: (string | number)[][] = [
  [
    "preset",
    "params",
    "rlx ms/step",
    "torch ms/step",
    "rlx tok/s",
    "torch tok/s",
    "rlx/torch",
    "rlx GFLOP/s",
    "of ceiling",
  ],
];
for (const name of presets) {
  const preset = PRESETS[name];
  if (!preset) throw new Error(`unknown preset ${name}`);
  const config = preset.config.shim;
  using model = await NativeModel.create(config, { seed: 0, device });
  if (autocast) model.setOption("autocast_bf16", true);
  using optim = NativeOptimizer.create(model, { weightDecay: 0.01 });
  const row = makeRow(lengths, 1);
  await rlxRound(model, optim, row, 1); // warm-up
  const rlxTimes: number[] = [];
  const torchTimes: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const ref = runReference<ReferenceResult>("train_step.py", [
      "--config",
      shimConfigJson(config),
      "--lengths",
      lengths.join(","),
      "--device",
      device,
      "--steps",
      String(steps),
      "--warmup",
      "1",
      "--threads",
      String(threads),
      ...(autocast ? ["--autocast"] : []),
    ]);
    torchTimes.push(...ref.step_s);
    const ours = await rlxRound(model, optim, row, steps);
    if (!Number.isFinite(ours.loss)) throw new Error(`rlx loss is not finite (${ours.loss})`);
    rlxTimes.push(...ours.times);
  }
  const tokens = lengths.reduce((a, b) => a + b, 0);
  const rlxS = median(rlxTimes);
  const torchS = median(torchTimes);
  const gflops = stepFlops(config, lengths) / rlxS / 1e9;
  results[name] = {
    tokens,
    rlx_s: rlxS,
    torch_s: torchS,
    rlx_tok_s: tokens / rlxS,
    torch_tok_s: tokens / torchS,
    ratio: torchS / rlxS,
    gflops,
    utilization: gflops / ceiling,
  };
  table.push([
    name,
    `${(countParams(config) / 1e6).toFixed(1)}M`,
    (rlxS * 1000).toFixed(0),
    (torchS * 1000).toFixed(0),
    (tokens / rlxS).toFixed(0),
    (tokens / torchS).toFixed(0),
    (torchS / rlxS).toFixed(2),
    gflops.toFixed(0),
    `${((gflops / ceiling) * 100).toFixed(0)}%`,
  ]);
}
printTable(table);
if (jsonOut) await Bun.write(jsonOut, JSON.stringify({ device, autocast, lengths, ceiling_gflops: ceiling, results }));
