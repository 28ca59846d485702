// Peak trainer memory (RSS, CPU) of LoRA against full fine-tuning on one model shape (the target:
// r = 16 on all seven targets at most 50% of full fine-tuning's on the qwen3-0.6b shape). Each
// mode runs in its own process, as the trainer does: load the model (float32 masters), LoRA or
// not, AdamW, then `--steps` optimizer steps over one packed row of `--tokens` tokens (half of
// each sample an rl action, half ce), and reports the kernel's high-water mark of its resident set
// (VmHWM) and the mean step time. Random weights: memory does not depend on their values.
//
//   bun bench/lora_memory.ts [--preset qwen3-0.6b] [--layers N] [--rank 16] [--steps 3] [--tokens 512]
//
// `--layers N` keeps the preset's widths and vocabulary with N layers (full fine-tuning of the
// 28-layer qwen3-0.6b shape needs ~11 GiB). On a shared machine a run is killed (and reported) when
// the machine's MemAvailable falls below `--floor-gib`, rather than pushing other work into the
// OOM killer.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hfConfigObject } from "../src/model/config.ts";
import { loadModel } from "../src/model/hf.ts";
import { getPreset, initModel } from "../src/model/presets.ts";
import { LORA_TARGETS } from "../src/model/config.ts";
import { NativeOptimizer, trainStep } from "../src/native/train.ts";
import { flag } from "./_reference.ts";

const peakRssGib = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"))![1]) / 2 ** 20;

if (process.env.RLX_LORA_MEMORY_CHILD) {
  const [dir, mode, rank, steps, tokens] = process.env.RLX_LORA_MEMORY_CHILD.split("|");
  const model = await loadModel(dir!, { dtype: "f32" });
  const afterLoad = peakRssGib();
  if (mode === "lora")
    model.addLora({ rank: Number(rank), alpha: 2 * Number(rank), dropout: 0, targets: LORA_TARGETS });
  const trainable = (mode === "lora" ? model.loraParams() : model.params()).reduce(
    (n, p) => n + p.shape.reduce((a, b) => a * b, 1),
    0,
  );
  const optimizer = NativeOptimizer.create(model, { weightDecay: 0 });
  const T = Number(tokens);
  const samples = 4;
  const n = T / samples;
  const half = (t: number) => (t % n >= n / 2 ? 1 : 0);
  const row = {
    tokenIds: Int32Array.from({ length: T }, (_, t) => 3 + ((t * 7919) % 250)),
    sampleLengths: Int32Array.from({ length: samples }, () => n),
    lossMask: Uint8Array.from({ length: T }, (_, t) => half(t)),
    advantages: Float32Array.from({ length: T }, (_, t) => (half(t) ? (t % 2 ? 1 : -1) : 0)),
    inferenceLogprobs: Float32Array.from({ length: T }, () => -12),
    temperatures: new Float32Array(T).fill(1),
    ceWeights: Float32Array.from({ length: T }, (_, t) => half(t) * 0.1),
  };
  const times: number[] = [];
  for (let s = 0; s < Number(steps); s++) {
    const start = performance.now();
    trainStep(model, row, { nRl: T / 2, nCe: T / 2, nRefKl: 1 });
    optimizer.step(1e-5, 1);
    times.push((performance.now() - start) / 1000);
  }
  console.log(JSON.stringify({ mode, trainable, afterLoadGib: afterLoad, peakGib: peakRssGib(), stepS: times }));
  process.exit(0);
}

const preset = flag("preset", "qwen3-0.6b");
const rank = flag("rank", "16");
const steps = flag("steps", "3");
const tokens = flag("tokens", "512");
const layers = flag("layers", "");
const floorGib = Number(flag("floor-gib", "1.5"));
const availableGib = () => Number(/MemAvailable:\s+(\d+) kB/.exec(readFileSync("/proc/meminfo", "utf8"))![1]) / 2 ** 20;
const root = mkdtempSync(join(flag("dir", tmpdir()), "rlx-bench-lora-mem-"));
try {
  const dir = join(root, "model");
  if (layers) {
    const configFile = join(root, "config.json");
    const hf = { ...hfConfigObject(getPreset(preset).config, "bfloat16"), num_hidden_layers: Number(layers) };
    writeFileSync(configFile, JSON.stringify(hf));
    await initModel({ configFile, out: dir, seed: 0, dtype: "bf16" });
  } else await initModel({ preset, out: dir, seed: 0, dtype: "bf16" });
  const results: Record<string, { trainable: number; peakGib: number; afterLoadGib: number; stepS: number[] }> = {};
  for (const mode of ["lora", "full"]) {
    const proc = Bun.spawn([process.execPath, import.meta.path], {
      env: { ...process.env, RLX_LORA_MEMORY_CHILD: [dir, mode, rank, steps, tokens].join("|") },
      stdout: "pipe",
      stderr: "pipe",
    });
    const watchdog = setInterval(() => {
      if (availableGib() < floorGib) {
        console.error(`${mode}: MemAvailable below ${floorGib} GiB: killing the run`);
        proc.kill("SIGKILL");
      }
    }, 200);
    const [out, err, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    clearInterval(watchdog);
    if (code !== 0) throw new Error(`${mode} run failed (exit ${code}):\n${err}`);
    const last = out.trim().split("\n").at(-1)!;
    results[mode] = JSON.parse(last);
    console.log(`${mode}: ${JSON.stringify(results[mode])}`);
  }
  const { lora, full } = results as Record<"lora" | "full", (typeof results)[string]>;
  console.log(
    `${preset}${layers ? ` with ${layers} layers` : ""}, r = ${rank} on ${LORA_TARGETS.length} targets, ${tokens} tokens x ${steps} steps: peak RSS LoRA ${lora.peakGib.toFixed(2)} GiB, full ${full.peakGib.toFixed(2)} GiB, ratio ${(lora.peakGib / full.peakGib).toFixed(3)}; trainable ${lora.trainable} vs ${full.trainable}`,
  );
} finally {
  rmSync(root, { recursive: true, force: true });
}
