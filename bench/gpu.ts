// The GPU check's measurements (scripts/gpu_check.sh runs it on a GPU node; docs/gpu.md), one
// command, one JSON and one table:
//   - the trainer step on one packed row of --tokens tokens, bf16 autocast over float32 master
//     weights: rlx against plain PyTorch eager on the same device (bench/train_step.ts, which
//     runs bench/reference/train_step.py), tokens/s and MFU over --peak-tflops;
//   - decode tokens/s of rlx's generator at each --batches size (bf16 weights, KV cache, temperature
//     1 sampling), prefill timed apart;
//   - mismatch_kl between the logprobs generation returns and the logprobs scoring gives the same
//     tokens (mean of ratio - log ratio - 1): what the trainer's importance ratios start from.
//
//   bun bench/gpu.ts [--device cuda] [--preset qwen3-0.6b] [--tokens 16384] [--batches 1,64,256]
//                    [--prompt 128] [--new 128] [--peak-tflops 989] [--json FILE]
//
// It also runs on the CPU with a small preset (--device cpu --preset tiny --tokens 2048
// --batches 1,16 --peak-tflops 0), which is how the script itself is checked without a GPU.
import { join } from "node:path";
import { PRESETS } from "../src/model/presets.ts";
import { loadNative } from "../src/native/ffi.ts";
import { generate, NativeGenerator, score } from "../src/native/generate.ts";
import { NativeModel } from "../src/native/model.ts";
import { deviceMemory, runtimeInfo } from "../src/native/runtime.ts";
import { flag, median, printTable } from "./_reference.ts";

const device = flag("device", "cuda");
const presetName = flag("preset", "qwen3-0.6b");
const tokens = Number(flag("tokens", "16384"));
const batches = flag("batches", "1,64,256").split(",").map(Number);
const promptLength = Number(flag("prompt", "128"));
const newTokens = Number(flag("new", "128"));
const peakTflops = Number(flag("peak-tflops", device.startsWith("cuda") ? "989" : "0"));
const jsonOut = flag("json", "");
const preset = PRESETS[presetName];
if (!preset) throw new Error(`unknown preset ${presetName}`);

await loadNative();
const info = await runtimeInfo();
console.log(`libtorch ${info.torch_version} on ${device}: ${info.gpus.map((g) => g.name).join(", ") || "no GPU"}`);

// 1. the trainer step, rlx against PyTorch eager (its own process: it loads the model twice)
const trainJson = join(process.env.TMPDIR ?? "/tmp", `rlx-gpu-train-${process.pid}.json`);
const train = Bun.spawnSync(
  [
    process.execPath,
    join(import.meta.dir, "train_step.ts"),
    ...["--presets", presetName, "--device", device, "--tokens", String(tokens), "--autocast"],
    ...["--rounds", "2", "--steps", "3", "--peak-tflops", String(peakTflops), "--json", trainJson],
  ],
  { stdout: "inherit", stderr: "inherit" },
);
if (train.exitCode !== 0) throw new Error(`bench/train_step.ts failed (exit ${train.exitCode})`);
const trainer = (await Bun.file(trainJson).json()).results[presetName] as Record<string, number>;

// 2. decode throughput, bf16 weights
using model = await NativeModel.create(preset.config.shim, { seed: 0, dtype: "bf16", device });
const prompt = (b: number) => Int32Array.from({ length: promptLength }, (_, i) => (b * 131 + i * 17) % 259);
const decode: Record<string, { prefill_s: number; decode_tok_s: number }> = {};
for (const batch of batches) {
  const runs: { prefill: number; decode: number }[] = [];
  for (let round = 0; round < 3; round++) {
    using gen = NativeGenerator.create(model, { slots: batch, capacity: promptLength + newTokens });
    const t0 = performance.now();
    gen.add(
      Array.from({ length: batch }, (_, b) => ({
        prompt: prompt(b),
        sampling: { temperature: 1, maxNewTokens: newTokens, seed: round * 1000 + b },
      })),
    );
    const t1 = performance.now();
    for (let i = 0; i < newTokens - 1; i++) gen.step();
    const t2 = performance.now();
    if (round > 0) runs.push({ prefill: (t1 - t0) / 1000, decode: (t2 - t1) / 1000 }); // round 0 warms up
  }
  decode[String(batch)] = {
    prefill_s: median(runs.map((r) => r.prefill)),
    decode_tok_s: (batch * (newTokens - 1)) / median(runs.map((r) => r.decode)),
  };
}

// 3. generation against scoring on the same tokens
const prompts = Array.from({ length: 16 }, (_, b) => Array.from(prompt(b)));
const generated = generate(
  model,
  prompts,
  prompts.map((_, b) => ({ temperature: 1, maxNewTokens: 64, seed: 99 + b })),
);
const scored = score(
  model,
  prompts.map((p, b) => [...p, ...generated[b]!.tokens]),
  { temperature: 1 },
).logprobs;
let kl = 0;
let n = 0;
generated.forEach((c, b) =>
  c.logprobs.forEach((glp, j) => {
    const d = scored[b]![promptLength + j]! - glp;
    kl += Math.exp(d) - d - 1;
    n += 1;
  }),
);
const mismatchKl = kl / n;
const memory = await deviceMemory(device);

const result = {
  torch: info.torch_version,
  device,
  gpus: info.gpus,
  preset: presetName,
  trainer: { ...trainer, peak_tflops: peakTflops },
  decode,
  mismatch_kl: mismatchKl,
  peak_memory_gib: memory.peak,
};
printTable([
  ["measure", "rlx", "PyTorch eager", "goal"],
  ["trainer tok/s", trainer.rlx_tok_s!.toFixed(0), trainer.torch_tok_s!.toFixed(0), ">= 1.2x eager"],
  ["trainer MFU", `${(trainer.utilization! * 100).toFixed(1)}%`, "", ">= 40%"],
  ...batches.map((b) => [`decode tok/s, batch ${b}`, decode[String(b)]!.decode_tok_s.toFixed(0), "", ""]),
  ["mismatch_kl (generation vs scoring)", mismatchKl.toExponential(2), "", "< 1e-3"],
]);
if (jsonOut) await Bun.write(jsonOut, JSON.stringify(result, null, 2));
