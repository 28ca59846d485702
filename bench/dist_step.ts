// Data-parallel step throughput: the same step batch trained by one process and by N Gloo ranks
// (src/trainer/ranks.ts), in one command, as tokens/s and the ratio against one process.
//
//   bun bench/dist_step.ts [--preset tiny] [--steps 4] [--ranks 2] [--samples 48]
//
// Configurations: one process with 1 thread, one process with `ranks` threads (the baseline: the
// same cores as the ranks), and `ranks` processes of 1 thread each. A step is trainStep (or
// trainStepOnRank): every micro-batch's forward and backward, the count and gradient all-reduces,
// AdamW. Each configuration runs one warm-up step, then the median over --steps of wall time per
// step (the slowest rank's, since the ranks meet at the all-reduce). On a 2-core machine this is
// not a scaling result: two 1-thread ranks compete with the 2-thread process for the same cores.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PRESETS } from "../src/model/presets.ts";
import { ProcessGroup } from "../src/native/dist.ts";
import { NativeModel } from "../src/native/model.ts";
import { NativeOptimizer } from "../src/native/train.ts";
import { costModelOf } from "../src/trainer/balance.ts";
import { packStep } from "../src/data/pack.ts";
import type { TrainingSample } from "../src/data/types.ts";
import { trainStepOnRank } from "../src/trainer/ranks.ts";
import { nativeLearner, trainStep } from "../src/trainer/step.ts";
import { flag, median, printTable } from "./_reference.ts";

const LOSS = { dppo_mask_low: 0.2, dppo_mask_high: 0.2, adv_tau: 1, kl_tau: 1e-3 };
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
}) {
  const config = PRESETS[args.preset]!.config.shim;
  using model = await NativeModel.create(config, { seed: 0 });
  using optimizer = NativeOptimizer.create(model);
  const learner = nativeLearner(model, optimizer);
  const step = batch(args.samples, config.vocab_size);
  const opts = { lr: 1e-4, maxGradNorm: 1, loss: LOSS };
  using group =
    args.rank >= 0
      ? await ProcessGroup.create({ rank: args.rank, worldSize: args.world, store: { type: "file", path: args.store } })
      : null;
  const dp = group ? { group, model, cost: costModelOf(config) } : null;
  const seconds: number[] = [];
  for (let s = 0; s <= args.steps; s++) {
    group?.barrier();
    const t0 = performance.now();
    if (dp) trainStepOnRank(dp, learner, step, opts);
    else trainStep(learner, step, opts);
    group?.barrier();
    if (s > 0) seconds.push((performance.now() - t0) / 1000);
  }
  console.log(JSON.stringify({ seconds: median(seconds), tokens: step.tokens, rows: step.rows.length }));
}

async function runConfig(name: string, threads: number, world: number, base: Record<string, unknown>) {
  const dir = mkdtempSync(join(tmpdir(), "rlx-bench-dist-"));
  try {
    const procs = Array.from({ length: world }, (_, rank) =>
      Bun.spawn(
        [
          process.execPath,
          import.meta.path,
          "--worker",
          JSON.stringify({ ...base, rank: world > 1 ? rank : -1, world, store: join(dir, "store") }),
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
    return { name, seconds, tokens: outs[0].tokens as number, rows: outs[0].rows as number };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === "--worker") {
  await worker(JSON.parse(process.argv[3]!));
} else {
  const ranks = Number(flag("ranks", "2"));
  const base = {
    preset: flag("preset", "tiny"),
    steps: Number(flag("steps", "4")),
    samples: Number(flag("samples", "48")),
  };
  const results = [
    await runConfig(`1 process, ${ranks} threads`, ranks, 1, base),
    await runConfig("1 process, 1 thread", 1, 1, base),
    await runConfig(`${ranks} Gloo ranks, 1 thread each`, 1, ranks, base),
  ];
  const baseline = results[0]!;
  console.log(
    `preset ${base.preset}, ${baseline.tokens} tokens in ${baseline.rows} rows of <= ${SEQ_LEN} per step, median of ${base.steps} steps`,
  );
  printTable([
    ["configuration", "s/step", "tokens/s", "vs baseline"],
    ...results.map((r) => [
      r.name,
      r.seconds.toFixed(3),
      Math.round(r.tokens / r.seconds),
      `${(baseline.seconds / r.seconds).toFixed(2)}x`,
    ]),
  ]);
}
