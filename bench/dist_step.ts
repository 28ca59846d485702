// Data-parallel step throughput: the same step batch trained by one process and by N Gloo ranks
// (src/trainer/ranks.ts), in one command, as tokens/s and the ratio against one process.
//
//   bun bench/dist_step.ts [--preset tiny] [--steps 4] [--ranks 2] [--samples 48] [--shard full]
//   bun bench/dist_step.ts --device cuda --shard full [--preset qwen3-0.6b]   (scripts/gpu_check.sh)
//
// Configurations: one process with 1 thread, one process with `ranks` threads (the baseline: the
// same cores as the ranks), and `ranks` processes of 1 thread each. A step is trainStep (or
// trainStepOnRank): every micro-batch's forward and backward, the count and gradient all-reduces,
// AdamW. Each configuration runs one warm-up step, then the median over --steps of wall time per
// step (the slowest rank's, since the ranks meet at the all-reduce). On a 2-core machine this is
// not a scaling result: two 1-thread ranks compete with the 2-thread process for the same cores.
//
// --shard optimizer|full adds the ranks sharded that way (docs/scaling.md, "Sharded training"),
// and for "full" once more with the next unit's gather not started ahead (model option
// shard_prefetch 0): the difference is what overlapping the gathers with the compute saves. Each
// sharded row also gives the bytes one rank's collectives moved per step, from the shard layout
// (Gloo's reduce-scatter is an all-reduce: twice a reduce-scatter's volume), and its peak memory
// (VmHWM, or the CUDA allocator's peak). --device cuda runs one rank on the GPU over a one-rank
// NCCL group (no bytes move; the overlap and memory lines are what it is for).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PRESETS } from "../src/model/presets.ts";
import { ProcessGroup } from "../src/native/dist.ts";
import { NativeModel, type ShardMode } from "../src/native/model.ts";
import { deviceMemory } from "../src/native/runtime.ts";
import { NativeOptimizer } from "../src/native/train.ts";
import { costModelOf } from "../src/trainer/balance.ts";
import { packStep } from "../src/data/pack.ts";
import type { TrainingSample } from "../src/data/types.ts";
import { trainStepOnRank } from "../src/trainer/ranks.ts";
import { nativeLearner, trainStep } from "../src/trainer/step.ts";
import { flag, median, printTable } from "./_reference.ts";
import { rlLoss } from "../src/data/loss_types.ts";

const LOSS = rlLoss();
const SEQ_LEN = 1024;

function batch(samples: number, vocab: number) {
  let state = 7;
  const rand = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  const all: TrainingSample[] = Array.from({ length: samples }, (_, i) => {
    const n = 64 + Math.floor(rand() * 448);
    const mask = Array.from({ length: n }, (_, t) => (t >= n / 2 ? 1 : 0));
    return {
      tokenIds: Array.from({ length: n }, () => Math.floor(rand() * vocab)),
      lossMask: mask,
      advantages: mask.map((m) => m * (rand() - 0.5)),
      inferenceLogprobs: mask.map((m) => (m ? -Math.log(vocab) : 0)),
      temperatures: mask.map(() => 1),
      env: "bench",
      rolloutId: `r${i}`,
    };
  });
  return packStep(all, { seqLen: SEQ_LEN });
}

/** One configuration inside this process: rank < 0 means no group. Prints seconds per step as JSON. */
async function worker(args: {
  preset: string;
  steps: number;
  samples: number;
  rank: number;
  world: number;
  store: string;
  shard: ShardMode;
  prefetch: boolean;
  device: string;
}) {
  const config = PRESETS[args.preset]!.config.shim;
  using model = await NativeModel.create(config, { seed: 0, device: args.device });
  const backend = args.device === "cuda" ? "nccl" : "gloo";
  const store = { type: "file" as const, path: args.store };
  using group =
    args.rank >= 0 ? await ProcessGroup.create({ rank: args.rank, worldSize: args.world, store, backend }) : null;
  if (args.shard !== "none") group!.shard(model, args.shard);
  model.setOption("shard_prefetch", args.prefetch);
  using optimizer = NativeOptimizer.create(model);
  const learner = nativeLearner(model, optimizer);
  const step = batch(args.samples, config.vocab_size);
  const opts = { lr: 1e-4, maxGradNorm: 1, losses: [LOSS] };
  const dp = group ? { group, model, cost: costModelOf(config), shard: args.shard } : null;
  const seconds: number[] = [];
  for (let s = 0; s <= args.steps; s++) {
    group?.barrier();
    const t0 = performance.now();
    if (dp) trainStepOnRank(dp, learner, step, opts);
    else trainStep(learner, step, opts);
    group?.barrier();
    if (s > 0) seconds.push((performance.now() - t0) / 1000);
  }
  const microBatches = step.rows.length / Math.max(1, args.world);
  const moved = args.shard === "none" ? 0 : collectiveBytes(model, args.shard, backend, microBatches);
  const peakGib =
    args.device === "cuda"
      ? (await deviceMemory("cuda")).peak
      : Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"))![1]) / 2 ** 20;
  console.log(
    JSON.stringify({ seconds: median(seconds), tokens: step.tokens, rows: step.rows.length, moved, peakGib }),
  );
}

/** Bytes one rank's sharded collectives move per step (sent plus received), from the layout. */
function collectiveBytes(model: NativeModel, shard: ShardMode, backend: string, microBatches: number): number {
  const { world, units } = model.shardLayout();
  const share = (world - 1) / world;
  const element = model.dtype === "f64" ? 8 : 4;
  const reduceScatter = (bytes: number) => (backend === "gloo" ? 2 : 1) * 2 * share * bytes; // all-reduce on Gloo
  const gather = (bytes: number) => 2 * share * bytes;
  let total = 0;
  for (const u of units) {
    const bytes = u.chunk * world * element;
    // "optimizer": the gradient in, the updated slices out, once a step; "full": per micro-batch a
    // gather in the forward and another in the backward, and the gradient's reduce-scatter
    total +=
      shard === "optimizer"
        ? reduceScatter(bytes) + gather(bytes)
        : microBatches * (2 * gather(bytes) + reduceScatter(bytes));
  }
  return total;
}

interface Measured {
  name: string;
  seconds: number;
  tokens: number;
  rows: number;
  moved: number;
  peakGib: number;
}

async function runConfig(
  name: string,
  threads: number,
  world: number,
  base: Record<string, unknown>,
): Promise<Measured> {
  const dir = mkdtempSync(join(tmpdir(), "rlx-bench-dist-"));
  try {
    const procs = Array.from({ length: world }, (_, rank) =>
      Bun.spawn(
        [
          process.execPath,
          import.meta.path,
          "--worker",
          JSON.stringify({
            shard: "none",
            prefetch: true,
            ...base,
            rank: world > 1 || base.shard !== undefined ? rank : -1,
            world,
            store: join(dir, "store"),
          }),
        ],
        {
          env: { ...process.env, RLX_THREADS: String(threads) },
          stdout: "pipe",
          stderr: "inherit",
        },
      ),
    );
    const outs = await Promise.all(
      procs.map(async (p) =>
        (await p.exited) === 0 ? JSON.parse((await new Response(p.stdout).text()).trim().split("\n").pop()!) : null,
      ),
    );
    if (outs.some((o) => o === null)) throw new Error(`${name} failed`);
    const seconds = Math.max(...outs.map((o) => o.seconds as number));
    const peakGib = Math.max(...outs.map((o) => o.peakGib as number));
    return { name, seconds, tokens: outs[0].tokens, rows: outs[0].rows, moved: outs[0].moved, peakGib };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === "--worker") {
  await worker(JSON.parse(process.argv[3]!));
} else {
  const ranks = Number(flag("ranks", "2"));
  const shard = flag("shard", "none") as ShardMode;
  const device = flag("device", "cpu");
  const base = {
    preset: flag("preset", "tiny"),
    steps: Number(flag("steps", "4")),
    samples: Number(flag("samples", "48")),
    device,
  };
  const sharded = (world: number, prefetch = true) =>
    runConfig(
      `${world} ${device === "cuda" ? "NCCL" : "Gloo"} rank(s), shard ${shard}${prefetch ? "" : ", no prefetch"}`,
      1,
      world,
      { ...base, shard, prefetch },
    );
  const results: Measured[] = [];
  if (device === "cuda") {
    results.push(await runConfig("1 process on the GPU, whole model", 1, 1, base));
    if (shard !== "none") results.push(await sharded(1), ...(shard === "full" ? [await sharded(1, false)] : []));
  } else {
    results.push(
      await runConfig(`1 process, ${ranks} threads`, ranks, 1, base),
      await runConfig("1 process, 1 thread", 1, 1, base),
      await runConfig(`${ranks} Gloo ranks, 1 thread each`, 1, ranks, base),
    );
    if (shard !== "none")
      results.push(await sharded(ranks), ...(shard === "full" ? [await sharded(ranks, false)] : []));
  }
  const baseline = results[0]!;
  console.log(
    `preset ${base.preset} on ${device}, ${baseline.tokens} tokens in ${baseline.rows} rows of <= ${SEQ_LEN} per step, median of ${base.steps} steps`,
  );
  printTable([
    ["configuration", "s/step", "tokens/s", "vs baseline", "MB moved/step/rank", "peak GiB"],
    ...results.map((r) => [
      r.name,
      r.seconds.toFixed(3),
      Math.round(r.tokens / r.seconds),
      `${(baseline.seconds / r.seconds).toFixed(2)}x`,
      (r.moved / 1e6).toFixed(1),
      r.peakGib.toFixed(2),
    ]),
  ]);
}
