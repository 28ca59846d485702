// Shared-prefix training (docs/architecture.md §4) against whole samples, side by side in one
// command: a forth-like step, GROUPS groups of 8 samples that share a PROMPT-token prompt, each with
// its own COMPLETION-token completion (GRPO advantages), packed by packStep into rows of seq_len
// tokens both ways, then trained (every row's forward, loss and backward, and AdamW). Before timing,
// one step's gradient is read both ways and compared (the largest difference relative to the
// largest gradient entry). The two sides alternate in rounds; each figure is a median.
//
//   bun bench/prefix_share.ts [--preset tiny] [--groups 2] [--prompt 1000] [--completion 64]
//                             [--seq-len 4096] [--rounds 3] [--steps 2] [--threads N] [--json FILE]
import { writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { type PackedStep, packStep } from "../src/data/pack.ts";
import type { TrainingSample } from "../src/data/types.ts";
import { PRESETS } from "../src/model/presets.ts";
import { loadNative } from "../src/native/ffi.ts";
import { NativeModel } from "../src/native/model.ts";
import { runtimeInfo } from "../src/native/runtime.ts";
import { NativeOptimizer, trainStep } from "../src/native/train.ts";
import { flag, median, printTable } from "./_reference.ts";

const preset = PRESETS[flag("preset", "tiny")];
if (!preset) throw new Error(`unknown preset ${flag("preset", "tiny")}`);
const groups = Number(flag("groups", "2"));
const prompt = Number(flag("prompt", "1000"));
const completion = Number(flag("completion", "64"));
const seqLen = Number(flag("seq-len", "4096"));
const rounds = Number(flag("rounds", "3"));
const steps = Number(flag("steps", "2"));
const threads = Number(flag("threads", String(cpus().length)));
const jsonOut = flag("json", "");
await loadNative(threads);

let state = 7;
const rand = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
const vocab = preset.config.shim.vocab_size;
const ids = (n: number) => Array.from({ length: n }, () => Math.floor(rand() * vocab));
const samples: TrainingSample[] = [];
for (let g = 0; g < groups; g++) {
  const shared = ids(prompt);
  for (let i = 0; i < 8; i++) {
    const n = prompt + completion;
    const mask = Array.from({ length: n }, (_, t) => (t >= prompt ? 1 : 0));
    const advantage = rand() - 0.5;
    samples.push({
      tokenIds: [...shared, ...ids(completion)],
      lossMask: mask,
      advantages: mask.map((m) => m * advantage),
      inferenceLogprobs: mask.map((m) => (m ? -Math.log(vocab) + (rand() - 0.5) * 0.1 : 0)),
      temperatures: mask.map(() => 1),
      env: "forth",
      rolloutId: `g${g}/r${i}`,
    });
  }
}
const whole = packStep(samples, { seqLen });
const shared = packStep(samples, { seqLen, sharePrefixes: true });

using model = await NativeModel.create(preset.config.shim, { seed: 0 });
using optim = NativeOptimizer.create(model, { weightDecay: 0.01 });
const lossOf = (p: PackedStep) => ({ nRl: Math.max(1, p.counts.rl), nCe: 1, nRefKl: 1 });

function gradients(p: PackedStep): Float64Array[] {
  model.zeroGrad();
  for (const row of p.rows) trainStep(model, row, lossOf(p), p.envs.length);
  const out = model.params().map((x) => {
    const bytes = model.getGrad(x.name, "f64");
    return new Float64Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 8);
  });
  model.zeroGrad();
  return out;
}

function timeSteps(p: PackedStep): number[] {
  const times: number[] = [];
  for (let i = 0; i < steps; i++) {
    const t0 = performance.now();
    for (const row of p.rows) trainStep(model, row, lossOf(p), p.envs.length);
    optim.step(1e-6, 1.0);
    times.push((performance.now() - t0) / 1000);
  }
  return times;
}

const a = gradients(whole);
const b = gradients(shared);
let diff = 0;
let scale = 0;
a.forEach((g, k) =>
  g.forEach((x, i) => ((diff = Math.max(diff, Math.abs(x - b[k]![i]!))), (scale = Math.max(scale, Math.abs(x))))),
);
const gradRel = diff / scale;

const info = await runtimeInfo();
console.log(
  `libtorch ${info.torch_version}, ${info.threads} threads, ${cpus()[0]?.model ?? "cpu"}; ${flag("preset", "tiny")} f32; ${groups} groups x 8 samples of ${prompt} + ${completion} tokens, seq_len ${seqLen}; ${rounds} rounds x ${steps} steps per side`,
);
timeSteps(shared); // warm-up
const times = { whole: [] as number[], shared: [] as number[] };
for (let r = 0; r < rounds; r++) {
  times.whole.push(...timeSteps(whole));
  times.shared.push(...timeSteps(shared));
}
const row = (name: string, p: PackedStep, t: number[]) => [
  name,
  p.rows.length,
  p.tokens,
  (median(t) * 1000).toFixed(0),
  (p.tokens / median(t)).toFixed(0),
];
printTable([
  ["layout", "rows", "tokens", "ms/step", "tok/s"],
  row("whole samples", whole, times.whole),
  row("shared prefixes", shared, times.shared),
]);
const speedup = median(times.whole) / median(times.shared);
console.log(
  `\nshared/whole speed-up ${speedup.toFixed(2)}x; gradient difference ${gradRel.toExponential(2)} of the largest entry`,
);
if (jsonOut)
  writeFileSync(
    jsonOut,
    JSON.stringify({
      speedup,
      grad_rel_diff: gradRel,
      whole_s: median(times.whole),
      shared_s: median(times.shared),
      tokens: { whole: whole.tokens, shared: shared.tokens },
    }),
  );
