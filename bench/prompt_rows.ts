// A training step on a real-vocabulary model whose rows are mostly prompt, with this checkout's
// shim against an older one (BASE, a librlx.so built from another commit), in one command: the
// trainer's first LM-head pass reads only the rows a loss or metric uses (native/src/train.cpp,
// read_rows) where it once read every row, and a CPU's auto LM-head chunk keeps its float32 logits
// under glibc's mmap threshold (native/src/model.h); with a 152k vocabulary the LM head is most of
// the step. SAMPLES samples of PROMPT random prompt tokens and COMPLETION action tokens (GRPO
// advantages), packed whole into one row, on the tiny-bpe preset (Qwen3's 151,936-row vocabulary).
// Each side runs in its own process (a shim is loaded once per process), alternating in rounds;
// each figure is a median. Both sides first report the gradient of the same step, compared here.
//
//   bun build.ts --shim --out-dir /tmp/base-shim   (at the base commit, e.g. from `git archive`)
//   bun bench/prompt_rows.ts --base /tmp/base-shim/librlx.so [--samples 4] [--prompt 1000]
//                            [--completion 64] [--rounds 3] [--steps 2] [--chunk N]
//
// --chunk sets both sides' LM-head chunk (model option logits_chunk; default auto, which on a CPU
// is now 48 tokens for this vocabulary where it was 220): --chunk 220 on both sides measures the
// rows alone.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { packStep } from "../src/data/pack.ts";
import type { TrainingSample } from "../src/data/types.ts";
import { PRESETS } from "../src/model/presets.ts";
import { loadNative } from "../src/native/ffi.ts";
import { NativeModel } from "../src/native/model.ts";
import { NativeOptimizer, trainStep } from "../src/native/train.ts";
import { flag, median, printTable } from "./_reference.ts";

const samplesN = Number(flag("samples", "4"));
const prompt = Number(flag("prompt", "1000"));
const completion = Number(flag("completion", "64"));
const rounds = Number(flag("rounds", "3"));
const steps = Number(flag("steps", "2"));

if (process.argv.includes("--child")) {
  await loadNative();
  const config = PRESETS["tiny-bpe"]!.config.shim;
  let state = 7;
  const rand = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  const samples: TrainingSample[] = Array.from({ length: samplesN }, (_, i) => {
    const n = prompt + completion;
    const mask = Array.from({ length: n }, (_, t) => (t >= prompt ? 1 : 0));
    const advantage = rand() - 0.5;
    return {
      tokenIds: Array.from({ length: n }, () => Math.floor(rand() * config.vocab_size)),
      lossMask: mask,
      advantages: mask.map((m) => m * advantage),
      inferenceLogprobs: mask.map((m) => (m ? -Math.log(config.vocab_size) : 0)),
      temperatures: mask.map(() => 1),
      env: "bench",
      rolloutId: `r${i}`,
    };
  });
  const packed = packStep(samples, { seqLen: samplesN * (prompt + completion) });
  using model = await NativeModel.create(config, { seed: 0 });
  using optim = NativeOptimizer.create(model, { weightDecay: 0.01 });
  if (flag("chunk", "")) model.setOption("logits_chunk", Number(flag("chunk", "")));
  const loss = { nRl: packed.counts.rl, nCe: 1, nRefKl: 1 };
  const step = () => {
    for (const row of packed.rows) trainStep(model, row, loss, packed.envs.length);
  };
  model.zeroGrad();
  step();
  const gradFile = flag("grads", "");
  if (gradFile) writeFileSync(gradFile, Buffer.concat(model.params().map((x) => model.getGrad(x.name, "f32"))));
  model.zeroGrad();
  const times: number[] = [];
  for (let i = 0; i < steps; i++) {
    const t0 = performance.now();
    step();
    optim.step(1e-6, 1.0);
    times.push((performance.now() - t0) / 1000);
  }
  console.log(JSON.stringify({ times, tokens: packed.tokens }));
  process.exit(0);
}

const base = flag("base", "");
if (!base) throw new Error("--base PATH (a librlx.so built from the base commit) is required");
const dir = mkdtempSync(join(tmpdir(), "rlx-prompt-rows-"));
async function side(shim: string | undefined, grads = "") {
  const env = { ...process.env };
  if (shim) env.RLX_SHIM = shim;
  else delete env.RLX_SHIM;
  const args = ["bun", import.meta.path, "--child", ...process.argv.slice(2), ...(grads ? ["--grads", grads] : [])];
  const proc = Bun.spawn(args, { env, stdout: "pipe", stderr: "inherit" });
  const out = await new Response(proc.stdout).text();
  if ((await proc.exited) !== 0) throw new Error(`the ${shim ? "base" : "this checkout's"} side failed`);
  return JSON.parse(out.trim().split("\n").at(-1)!) as { times: number[]; tokens: number };
}

console.log(
  `${cpus()[0]?.model ?? "cpu"}, ${cpus().length} cores; tiny-bpe f32 (vocab 151936); ${samplesN} samples of ${prompt} prompt + ${completion} action tokens in one row; ${rounds} rounds x ${steps} steps per side`,
);
await side(base, join(dir, "base.f32"));
await side(undefined, join(dir, "this.f32"));
const f32 = (name: string) => new Float32Array(new Uint8Array(readFileSync(join(dir, name))).buffer);
const [gBase, gThis] = [f32("base.f32"), f32("this.f32")];
rmSync(dir, { recursive: true });
let diff = 0;
let scale = 0;
gBase.forEach((x, i) => ((diff = Math.max(diff, Math.abs(x - gThis[i]!))), (scale = Math.max(scale, Math.abs(x)))));
const times = { base: [] as number[], this: [] as number[] };
let tokens = 0;
for (let r = 0; r < rounds; r++) {
  times.base.push(...(await side(base)).times);
  const mine = await side(undefined);
  times.this.push(...mine.times);
  tokens = mine.tokens;
}
printTable([
  ["shim", "ms/step", "tok/s"],
  ["base", (median(times.base) * 1000).toFixed(0), (tokens / median(times.base)).toFixed(0)],
  ["this checkout", (median(times.this) * 1000).toFixed(0), (tokens / median(times.this)).toFixed(0)],
]);
console.log(
  `\nthis/base speed-up ${(median(times.base) / median(times.this)).toFixed(2)}x; gradient difference ${(diff / scale).toExponential(2)} of the largest entry`,
);
