// Per-rank peak memory and step time of training one long row whole (C = 1) and split over C
// context-parallel ranks (docs/scaling.md, "Long context"), measured in the same command. Each
// configuration runs as its own processes, as trainer ranks do: the `tiny-long` preset in float32,
// activation checkpointing on, a Gloo group of C ranks over a file store splitting the row
// (trainer.context_parallel = C), AdamW, then `--steps` optimizer steps of one packed row holding
// one sample of `--lengths` tokens (half prompt, half rl action: the longest sample a row of that
// length can hold, the worst case for attention). Each rank reports the kernel's high-water mark
// of its resident set during the forward and backward (reset before each step) and its step times.
// `--shard full` shards the weights, gradients and AdamW state over the C ranks of a split row
// (trainer.shard = "full", as FSDP shards over data x context ranks); C = 1 has no one to shard
// with and stays whole. Ranks share the machine's cores: each of C ranks gets cores / C threads.
// `--device cuda` (the GPU check) puts every rank on the one GPU, the split ranks meeting over
// Gloo (NCCL refuses two ranks on one device), and reports the CUDA allocator's peak instead of
// the resident set.
//
//   RLX_SHIM=native/build/torch-2.13.0-cpu/librlx.so bun bench/long_context.ts
//       [--lengths 8192,16384,32768] [--splits 1,2] [--steps 2] [--device cpu] [--heap trainer|exact]
//       [--shard none|full] [--out FILE.json] [--no-serve]
//
// Then, in the same command, the engine's side: bench/long_serve.ts (unless --no-serve).
//
// `--heap exact` runs the ranks with glibc's mmap threshold at 1 MiB (GLIBC_TUNABLES), so every
// tensor above that is mapped and unmapped on its own and the resident peak is about what is
// live at once. The default is the trainer's allocator settings (native/src/heap.h: blocks under
// 32 MiB, or 32 MiB / C on a split row, from the heap, up to 512 MiB of free heap kept): faster,
// but its peak also counts the heap's fragmentation.
//
// On libtorch 1.13 (the default shim) C = 1 keeps every attention block's probabilities, so its
// rows grow with the square of the length; torch 2.x runs C = 1 through SDPA's fused kernel. The
// split path is the same kernel on both (native/src/context.cpp). `--out` writes the rows as one
// JSON object (experiments/results/long_context/).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { packStep } from "../src/data/pack.ts";
import { rlLoss } from "../src/data/loss_types.ts";
import { loadModel } from "../src/model/hf.ts";
import { initModel } from "../src/model/presets.ts";
import { ProcessGroup } from "../src/native/dist.ts";
import { deviceMemory, runtimeInfo } from "../src/native/runtime.ts";
import type { ShardMode } from "../src/native/model.ts";
import { NativeOptimizer } from "../src/native/train.ts";
import { costModelOf } from "../src/trainer/balance.ts";
import { trainStepOnRank } from "../src/trainer/ranks.ts";
import { type Learner, nativeLearner, trainStep } from "../src/trainer/step.ts";
import { flag, halfActionSample, outputsOf, printTable } from "./_reference.ts";

const GIB = 2 ** 30;
const status = (key: string) =>
  Number(new RegExp(`${key}:\\s+(\\d+) kB`).exec(readFileSync("/proc/self/status", "utf8"))![1]) * 1024;

interface ChildArgs {
  dir: string;
  device: string;
  rank: number;
  split: number;
  store: string;
  tokens: number;
  steps: number;
  shard: ShardMode;
}

interface RankResult {
  beforeStepsGib: number;
  /** The high-water mark of the steps (reset before each). */
  trainPeakGib: number;
  stepS: number[];
}

async function child(a: ChildArgs): Promise<RankResult> {
  using model = await loadModel(a.dir, { dtype: "f32", device: a.device });
  const cuda = a.device === "cuda";
  const peakNow = async () => (cuda ? (await deviceMemory("cuda")).peak : status("VmHWM") / GIB);
  using group =
    a.split > 1
      ? await ProcessGroup.create({ rank: a.rank, worldSize: a.split, store: { type: "file", path: a.store } })
      : null;
  if (group && a.shard !== "none") group.shard(model, a.shard);
  group?.splitRows(model); // the whole group is one replica
  model.activationCheckpointing = true;
  using optimizer = NativeOptimizer.create(model);
  let trainPeakGib = 0;
  const native = nativeLearner(model, optimizer);
  const learner: Learner = {
    trainRow: (...args) => native.trainRow(...args),
    optimizerStep: (lr, maxGradNorm) => native.optimizerStep(lr, maxGradNorm),
  };
  const step = packStep([halfActionSample(0, a.tokens, model.config.vocab_size)], { seqLen: a.tokens });
  const opts = { lr: 1e-5, maxGradNorm: 1, losses: [rlLoss()] };
  const beforeStepsGib = cuda ? (await deviceMemory("cuda")).allocated : status("VmRSS") / GIB;
  const stepS: number[] = [];
  for (let s = 0; s < a.steps; s++) {
    if (cuda) await deviceMemory("cuda", true);
    else writeFileSync("/proc/self/clear_refs", "5");
    const start = performance.now();
    // the peak includes the optimizer step's temporaries, which are the same at every split
    if (group) {
      const dp = { group, model, cost: costModelOf(model.config), contextParallel: a.split, shard: a.shard };
      trainStepOnRank(dp, learner, step, opts);
    } else trainStep(learner, step, opts);
    stepS.push((performance.now() - start) / 1000);
    trainPeakGib = Math.max(trainPeakGib, await peakNow());
  }
  return { beforeStepsGib, trainPeakGib, stepS };
}

if (process.env.RLX_LONG_CONTEXT_CHILD) {
  console.log(JSON.stringify(await child(JSON.parse(process.env.RLX_LONG_CONTEXT_CHILD) as ChildArgs)));
  process.exit(0);
}

async function measure(dir: string, root: string, tokens: number, split: number, steps: number) {
  const threads = String(Math.max(1, Math.floor(cpus().length / split)));
  const store = join(root, `store-${tokens}-${split}`);
  const procs = Array.from({ length: split }, (_, rank) => {
    const args: ChildArgs = { dir, device, rank, split, store, tokens, steps, shard };
    return Bun.spawn([process.execPath, import.meta.path], {
      env: { ...process.env, RLX_LONG_CONTEXT_CHILD: JSON.stringify(args), RLX_THREADS: threads, ...heapEnv },
      stdout: "pipe",
      stderr: "pipe",
    });
  });
  return (await outputsOf(procs)).map(({ out, err, code }) => {
    if (code !== 0) throw new Error(`${tokens} tokens, C = ${split}: a rank exited ${code}:\n${err}`);
    return JSON.parse(out.trim().split("\n").at(-1)!) as RankResult;
  });
}

interface Row {
  tokens: number;
  split: number;
  peakGib: number;
  activationGib: number;
  stepS: number;
  usPerToken: number;
}

const lengths = flag("lengths", "8192,16384,32768").split(",").map(Number);
const splits = flag("splits", "1,2").split(",").map(Number);
const steps = Number(flag("steps", "2"));
const device = flag("device", "cpu");
const heap = flag("heap", "trainer");
if (heap !== "trainer" && heap !== "exact") throw new Error(`--heap ${heap}: expected trainer or exact`);
const shard = flag("shard", "none") as ShardMode;
if (shard !== "none" && shard !== "full") throw new Error(`--shard ${shard}: expected none or full`);
const heapEnv = heap === "exact" ? { GLIBC_TUNABLES: "glibc.malloc.mmap_threshold=1048576" } : {};
const outFile = flag("out", "");
const root = mkdtempSync(join(tmpdir(), "rlx-bench-long-"));
try {
  const dir = join(root, "model");
  await initModel({ preset: "tiny-long", out: dir, seed: 0, dtype: "f32" });
  const rows: Row[] = [];
  for (const tokens of lengths)
    for (const split of splits) {
      const ranks = await measure(dir, root, tokens, split, steps);
      // the last step: the first also pays for first-touch allocations
      const stepS = Math.max(...ranks.map((r) => r.stepS.at(-1)!));
      const row: Row = {
        tokens,
        split,
        peakGib: Math.max(...ranks.map((r) => r.trainPeakGib)),
        activationGib: Math.max(...ranks.map((r) => r.trainPeakGib - r.beforeStepsGib)),
        stepS,
        usPerToken: (stepS / tokens) * 1e6,
      };
      rows.push(row);
      console.log(JSON.stringify(row));
    }
  const base = (tokens: number) => rows.find((r) => r.tokens === tokens && r.split === 1);
  printTable([
    ["tokens", "C", "peak GiB/rank", "x C=1", "activations GiB", "step s", "us/token", "x C=1"],
    ...rows.map((r) => {
      const b = base(r.tokens);
      return [
        r.tokens,
        r.split,
        r.peakGib.toFixed(2),
        b ? (r.peakGib / b.peakGib).toFixed(3) : "-",
        r.activationGib.toFixed(2),
        r.stepS.toFixed(1),
        r.usPerToken.toFixed(0),
        b ? (r.stepS / b.stepS).toFixed(2) : "-",
      ];
    }),
  ]);
  const info = await runtimeInfo();
  console.log(
    `tiny-long, float32, checkpointing on, ${device}, heap ${heap}, shard ${shard}, torch ${info.torch_version}, ${cpus()[0]?.model}`,
  );
  if (outFile) {
    const machine = { cpu: cpus()[0]?.model, cores: cpus().length, memTotalGib: totalmem() / GIB };
    const meta = {
      date: new Date().toISOString(),
      command: process.argv.slice(1).join(" "),
      torch: info.torch_version,
    };
    writeFileSync(
      outFile,
      JSON.stringify({ ...meta, machine, device, heap, shard, preset: "tiny-long", steps, rows }, null, 2) + "\n",
    );
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}

// The inference side of the same lengths: bench/long_serve.ts (4 x 16k beside 64 short sequences
// in a paged K/V budget against slots x capacity), unless --no-serve.
if (!process.argv.includes("--no-serve")) {
  const serve = Bun.spawnSync([process.execPath, join(import.meta.dir, "long_serve.ts"), "--device", device], {
    stdout: "inherit",
    stderr: "inherit",
  });
  if (serve.exitCode !== 0) throw new Error(`bench/long_serve.ts exited ${serve.exitCode}`);
}
