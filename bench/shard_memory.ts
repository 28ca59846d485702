// Peak trainer memory (RSS, CPU) per rank of the sharded modes (docs/scaling.md, "Sharded training"
// and "Memory planner") against one replicated rank, measured in the same command. Each
// configuration runs as its own processes, as trainer ranks do: load the model (float32 masters),
// join a c10d Gloo group over a file store, shard ("optimizer" or "full"), AdamW, then `--steps`
// optimizer steps in which every rank trains one packed row of one sample of `--seq-len` tokens
// (half prompt, half rl action). Each rank reports the kernel's high-water mark of its resident set
// (VmHWM, loading included) and its step times. Random weights: memory does not depend on them.
//
//   RLX_THREADS=1 bun bench/shard_memory.ts [--preset qwen3-0.6b] [--seq-len 2048] [--steps 3]
//       [--long-seq-len 4096] [--long-layers 6] [--long-steps 2] [--small-layers 8]
//       [--only replicated,full,optimizer,...]
//       [--floor-gib 2] [--out FILE.json]
//
// The configurations: "replicated" (one rank, trainer.shard "none", activation checkpointing on;
// "replicated_whole" the same without checkpointing, the trainer's default, run with --only),
// "full" (2 ranks; it always recomputes), "optimizer" (2 ranks, checkpointing on; whole weights and
// gradients on every rank make it ~11 GiB a rank, so by default it runs as "optimizer_small"
// against "replicated_small", both on `--small-layers` layers, 2 steps), and the activation
// comparison "act_off" / "act_on": one replicated rank at `--long-seq-len` with checkpointing off and
// on, on the preset's widths with `--long-layers` layers (the whole model's activations at 4096
// tokens without checkpointing do not fit in a small machine's memory). Without checkpointing the
// replicated 2048-token baseline of the whole qwen3-0.6b shape needs ~19 GiB (`rlx plan`), so the
// baseline recomputes too: the ratios then measure what sharding saves. One replicated rank runs
// without a group, as the trainer does: through one, the gradient all-reduce would hold a flat copy
// of every gradient. The activation part of a run is the
// high-water mark of its forward and backward (the kernel's, reset before each step) minus its
// resident set before the first step minus its gradients (4 bytes a parameter).
//
// On a shared machine every rank of a run is killed (and the run reported as such) when the
// machine's MemAvailable falls below `--floor-gib`, rather than pushing other work into the OOM
// killer. `--out` writes the results as one JSON object (experiments/results/shard_memory/).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { packStep } from "../src/data/pack.ts";
import { hfConfigObject } from "../src/model/config.ts";
import { loadModel } from "../src/model/hf.ts";
import { getPreset, initModel } from "../src/model/presets.ts";
import { ProcessGroup } from "../src/native/dist.ts";
import type { ShardMode } from "../src/native/model.ts";
import { NativeOptimizer } from "../src/native/train.ts";
import { costModelOf } from "../src/trainer/balance.ts";
import { trainStepOnRank } from "../src/trainer/ranks.ts";
import { type Learner, nativeLearner, trainStep } from "../src/trainer/step.ts";
import { flag, halfActionSample, outputsOf } from "./_reference.ts";
import { collectiveBytes, type UnitSizes } from "./_shard_traffic.ts";
import { rlLoss } from "../src/data/loss_types.ts";

const GIB = 2 ** 30;
const status = (key: string) =>
  Number(new RegExp(`${key}:\\s+(\\d+) kB`).exec(readFileSync("/proc/self/status", "utf8"))![1]) * 1024;
const availableGib = () => Number(/MemAvailable:\s+(\d+) kB/.exec(readFileSync("/proc/meminfo", "utf8"))![1]) / 2 ** 20;

interface ChildArgs {
  dir: string;
  rank: number;
  world: number;
  store: string;
  mode: ShardMode;
  checkpointing: boolean;
  seqLen: number;
  steps: number;
}

export interface RankResult {
  rank: number;
  params: number;
  afterLoadGib: number;
  beforeStepsRssGib: number;
  peakGib: number;
  /** The high-water mark of the steps' forward and backward (without the optimizer step). */
  trainPeakGib: number;
  stepS: number[];
  units: UnitSizes;
}

async function child(a: ChildArgs): Promise<RankResult> {
  using model = await loadModel(a.dir, { dtype: "f32" });
  const afterLoadGib = status("VmHWM") / GIB;
  // one replicated rank runs as the trainer runs it, without a group: through a group its
  // gradient all-reduce would hold a flat copy of every gradient (4 bytes a parameter)
  using group =
    a.world > 1 || a.mode !== "none"
      ? await ProcessGroup.create({ rank: a.rank, worldSize: a.world, store: { type: "file", path: a.store } })
      : null;
  if (group && a.mode !== "none") group.shard(model, a.mode);
  model.activationCheckpointing = a.checkpointing;
  using optimizer = NativeOptimizer.create(model);
  // the forward and backward's own high-water mark: the kernel's is reset (clear_refs 5) before
  // each step and read after the rows trained, before the optimizer step
  let peakGib = 0;
  let trainPeakGib = 0;
  const native = nativeLearner(model, optimizer);
  const learner: Learner = {
    trainRow(...args) {
      const out = native.trainRow(...args);
      trainPeakGib = Math.max(trainPeakGib, status("VmHWM") / GIB);
      return out;
    },
    optimizerStep: (lr, maxGradNorm) => native.optimizerStep(lr, maxGradNorm),
  };
  const dp = group && { group, model, cost: costModelOf(model.config), shard: a.mode };
  const vocab = model.config.vocab_size;
  const step = packStep(
    Array.from({ length: a.world }, (_, i) => halfActionSample(i, a.seqLen, vocab)),
    { seqLen: a.seqLen },
  );
  const losses = [rlLoss()];
  const beforeStepsRssGib = status("VmRSS") / GIB;
  const stepS: number[] = [];
  for (let s = 0; s < a.steps; s++) {
    peakGib = Math.max(peakGib, status("VmHWM") / GIB);
    writeFileSync("/proc/self/clear_refs", "5");
    const start = performance.now();
    const opts = { lr: 1e-5, maxGradNorm: 1, losses };
    if (dp) trainStepOnRank(dp, learner, step, opts);
    else trainStep(learner, step, opts);
    stepS.push((performance.now() - start) / 1000);
  }
  const units: UnitSizes =
    a.mode === "none"
      ? { embed: 0, layers: [], head: 0, tied: model.config.tie_word_embeddings }
      : unitSizes(model.shardLayout().units, model.config.tie_word_embeddings);
  const params = model.params().reduce((n, p) => n + p.shape.reduce((x, y) => x * y, 1), 0);
  peakGib = Math.max(peakGib, status("VmHWM") / GIB);
  return { rank: a.rank, params, afterLoadGib, beforeStepsRssGib, peakGib, trainPeakGib, stepS, units };
}

function unitSizes(units: { name: string; chunk: number }[], tied: boolean): UnitSizes {
  const padded = (u: { chunk: number }) => u.chunk; // per rank; the whole padded unit is chunk * world
  return {
    embed: padded(units[0]!),
    layers: units.slice(1, -1).map(padded),
    head: padded(units.at(-1)!),
    tied,
  };
}

if (process.env.RLX_SHARD_MEMORY_CHILD) {
  console.log(JSON.stringify(await child(JSON.parse(process.env.RLX_SHARD_MEMORY_CHILD) as ChildArgs)));
  process.exit(0);
}

interface RunSpec {
  name: string;
  mode: ShardMode;
  world: number;
  checkpointing: boolean;
  seqLen: number;
  steps: number;
  layers: number;
}

const preset = flag("preset", "qwen3-0.6b");
const seqLen = Number(flag("seq-len", "2048"));
const steps = Number(flag("steps", "3"));
const longSeqLen = Number(flag("long-seq-len", "4096"));
const longLayers = Number(flag("long-layers", "6"));
const longSteps = Number(flag("long-steps", "2"));
const smallLayers = Number(flag("small-layers", "8"));
const floorGib = Number(flag("floor-gib", "2"));
const outFile = flag("out", "");
const presetConfig = getPreset(preset).config;
const fullLayers = presetConfig.shim.num_hidden_layers;
const specs: RunSpec[] = [
  { name: "replicated", mode: "none", world: 1, checkpointing: true, seqLen, steps, layers: fullLayers },
  // the trainer's default: no checkpointing (~19 GiB for the whole qwen3-0.6b shape at 2048 tokens)
  { name: "replicated_whole", mode: "none", world: 1, checkpointing: false, seqLen, steps, layers: fullLayers },
  { name: "optimizer", mode: "optimizer", world: 2, checkpointing: true, seqLen, steps, layers: fullLayers },
  { name: "full", mode: "full", world: 2, checkpointing: true, seqLen, steps, layers: fullLayers },
  { name: "replicated_small", mode: "none", world: 1, checkpointing: true, seqLen, steps: 2, layers: smallLayers },
  { name: "optimizer_small", mode: "optimizer", world: 2, checkpointing: true, seqLen, steps: 2, layers: smallLayers },
  {
    name: "act_off",
    mode: "none",
    world: 1,
    checkpointing: false,
    seqLen: longSeqLen,
    steps: longSteps,
    layers: longLayers,
  },
  {
    name: "act_on",
    mode: "none",
    world: 1,
    checkpointing: true,
    seqLen: longSeqLen,
    steps: longSteps,
    layers: longLayers,
  },
];
const only = flag("only", "");
// "optimizer" on the whole shape needs ~10.5 GiB a rank (float32 weights and gradients whole on
// each): it runs only when asked for; by default it runs on `--small-layers` layers. So does
// "replicated_whole" (~19 GiB).
const chosen = only
  ? specs.filter((s) => only.split(",").includes(s.name))
  : specs.filter((s) => s.name !== "optimizer" && s.name !== "replicated_whole");

async function modelDir(root: string, layers: number): Promise<string> {
  const dir = join(root, `model-${layers}`);
  const configFile = join(root, `config-${layers}.json`);
  writeFileSync(configFile, JSON.stringify({ ...hfConfigObject(presetConfig, "bfloat16"), num_hidden_layers: layers }));
  await initModel({ configFile, out: dir, seed: 0, dtype: "bf16" });
  return dir;
}

/** Every rank of one configuration; null when the memory floor killed it. */
async function measure(spec: RunSpec, dir: string, root: string): Promise<RankResult[] | null> {
  const store = join(root, `store-${spec.name}`);
  const procs = Array.from({ length: spec.world }, (_, rank) => {
    const args: ChildArgs = {
      dir,
      rank,
      world: spec.world,
      store,
      mode: spec.mode,
      checkpointing: spec.checkpointing,
      seqLen: spec.seqLen,
      steps: spec.steps,
    };
    return Bun.spawn([process.execPath, import.meta.path], {
      env: { ...process.env, RLX_SHARD_MEMORY_CHILD: JSON.stringify(args) },
      stdout: "pipe",
      stderr: "pipe",
    });
  });
  let killed = false;
  const watchdog = setInterval(() => {
    if (availableGib() >= floorGib) return;
    killed = true;
    console.error(`${spec.name}: MemAvailable below ${floorGib} GiB: killing the run`);
    for (const p of procs) p.kill("SIGKILL");
  }, 200);
  const outs = await outputsOf(procs);
  clearInterval(watchdog);
  if (killed) return null;
  const failed = outs.find((o) => o.code !== 0);
  if (failed) throw new Error(`${spec.name} failed (exit ${failed.code}):\n${failed.err}`);
  return outs.map((o) => JSON.parse(o.out.trim().split("\n").at(-1)!) as RankResult);
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
/** Mean step time without the first step (allocation, page faults), or the only one. */
const steadyStep = (r: RankResult) => mean(r.stepS.length > 1 ? r.stepS.slice(1) : r.stepS);

const root = mkdtempSync(join(flag("dir", tmpdir()), "rlx-bench-shard-mem-"));
try {
  const dirs = new Map<number, string>();
  for (const layers of new Set(chosen.map((s) => s.layers))) dirs.set(layers, await modelDir(root, layers));
  const runs: Record<string, unknown> = {};
  const results = new Map<string, RankResult[] | null>();
  for (const spec of chosen) {
    const started = performance.now();
    const ranks = await measure(spec, dirs.get(spec.layers)!, root);
    results.set(spec.name, ranks);
    if (!ranks) {
      runs[spec.name] = { ...spec, killed: `MemAvailable fell below ${floorGib} GiB` };
      continue;
    }
    const peakGib = Math.max(...ranks.map((r) => r.peakGib));
    const r0 = ranks[0]!;
    const activationGib = r0.trainPeakGib - r0.beforeStepsRssGib - (4 * r0.params) / spec.world / GIB;
    runs[spec.name] = {
      ...spec,
      params: r0.params,
      peakGib,
      ranks: ranks.map(({ units: _, ...r }) => r),
      stepS: mean(ranks.map(steadyStep)),
      activationGib: spec.mode === "none" ? activationGib : undefined,
      collectiveBytesPerStep: collectiveBytes(spec.mode, spec.world, r0.units, r0.params),
      wallS: (performance.now() - started) / 1000,
    };
    console.log(`${spec.name}: ${JSON.stringify(runs[spec.name])}`);
  }
  // the "_small" runs compare with the replicated run of their own shape
  const baseOf = (name: string) =>
    runs[name.endsWith("_small") ? "replicated_small" : "replicated"] as { peakGib: number; stepS: number } | undefined;
  const lines: string[] = [];
  for (const [name, run] of Object.entries(runs) as [string, { peakGib?: number; stepS?: number; killed?: string }][]) {
    if (run.killed) {
      lines.push(`${name}: killed (${run.killed})`);
      continue;
    }
    const base = baseOf(name);
    const ratio = base ? ` = ${(run.peakGib! / base.peakGib).toFixed(3)}x replicated` : "";
    const time = base ? ` = ${(run.stepS! / base.stepS).toFixed(2)}x replicated` : "";
    lines.push(`${name}: per-rank peak ${run.peakGib!.toFixed(2)} GiB${ratio}; step ${run.stepS!.toFixed(1)} s${time}`);
  }
  const off = runs.act_off as { activationGib: number } | undefined;
  const on = runs.act_on as { activationGib: number } | undefined;
  if (off && on && !("killed" in off) && !("killed" in on))
    lines.push(
      `activations at ${longSeqLen} tokens (${longLayers} layers): off ${off.activationGib.toFixed(2)} GiB, on ${on.activationGib.toFixed(2)} GiB: ${(off.activationGib / on.activationGib).toFixed(2)}x less`,
    );
  console.log(`${preset}, float32 masters, Gloo, ${seqLen} tokens a rank:\n  ${lines.join("\n  ")}`);
  if (outFile) {
    const machine = {
      cpu: cpus()[0]?.model,
      cores: cpus().length,
      memTotalGib: totalmem() / GIB,
      loadAverage: loadavg(),
      threadsPerRank: process.env.RLX_THREADS ?? "all",
    };
    const row = { date: new Date().toISOString(), command: process.argv.slice(1).join(" "), machine };
    writeFileSync(outFile, JSON.stringify({ ...row, preset, seqLen, longSeqLen, longLayers, runs }, null, 2) + "\n");
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
