// Data-parallel trainer ranks over c10d Gloo (docs/scaling.md), with real processes: two ranks joined by a
// FileStore (or a TCPStore) in a temp dir, each a Bun process running fixtures/dist_rank.ts with
// one thread, against the single-rank step in this process on the same batch.
//   - the all-reduced gradient and the updated weights equal the single-rank ones (float32
//     tolerance), and both ranks end bit-identical;
//   - broadcastParams makes different starting weights identical (verifyParams says so before);
//   - a non-finite loss on one rank skips the update on every rank;
//   - with LoRA, the adapters' all-reduced gradient equals the single-rank one and the base stays put;
//   - a rank that dies mid-step, or stops answering, makes the other fail with an error naming
//     its rank and the call, within the timeout: no hang;
//   - balance.ts's dummy rows cost nothing: zero loss, zero gradient.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { distAvailable, ProcessGroup } from "../../src/native/dist.ts";
import { NativeOptimizer, trainStep as trainRow } from "../../src/native/train.ts";
import { dummyRow } from "../../src/trainer/balance.ts";
import { nativeLearner, trainStep, type StepResult } from "../../src/trainer/step.ts";
import { distStep, LOSS, MIXED_LOSSES, STEP_OPTIONS } from "./fixtures/dist_batch.ts";
import { DIST_LORA, readGrads, readLoraGrads, readLoraParams, readParams, tinyModel } from "./tiny_model.ts";
import { type RlLoss, rlLoss } from "../../src/data/loss_types.ts";

const FIXTURE = join(import.meta.dir, "fixtures/dist_rank.ts");
const dir = mkdtempSync(join(tmpdir(), "rlx-dist-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const gloo = await distAvailable("gloo");

type Json = Record<string, unknown>;
interface RankOutput {
  verifyBefore: string;
  rowsTrained: number;
  metrics: Record<string, number>;
  grads: Record<string, number[]>;
  params: Record<string, number[]>;
}

/**
 * Starts one fixture process per rank and waits until every one is loaded ("ready"), then lets
 * them all join at once (their stdin closes): start-up on a loaded machine is not part of any
 * timeout. `joined` is when they were let go.
 */
async function startRanks(ranks: Json[]) {
  const procs = ranks.map((args) =>
    Bun.spawn([process.execPath, FIXTURE, JSON.stringify(args)], {
      env: { ...process.env, RLX_THREADS: "1" },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  for (const proc of procs) {
    const reader = proc.stdout.getReader();
    let out = "";
    while (!out.includes("ready\n")) {
      const { done, value } = await reader.read();
      if (done) throw new Error(`a rank exited before it was ready:\n${await new Response(proc.stderr).text()}`);
      out += new TextDecoder().decode(value);
    }
    reader.releaseLock();
  }
  const joined = performance.now();
  for (const proc of procs) proc.stdin.end();
  return { procs, joined };
}

/** Two ranks run the "step" mode over a file store named `name` (with `extra` args each) and both
 * exit 0 with nothing on stderr; their outputs, rank 0's first. */
async function twoRankStep<T extends RankOutput = RankOutput>(name: string, extra: object = {}): Promise<[T, T]> {
  const store = { type: "file", path: join(dir, `store-${name}`) };
  const outs = [0, 1].map((rank) => join(dir, `${name}-rank${rank}.json`));
  const { procs } = await startRanks(
    [0, 1].map((rank) => ({ rank, worldSize: 2, store, mode: "step", out: outs[rank], ...extra })),
  );
  const codes = await Promise.all(procs.map((p) => p.exited));
  const errs = await Promise.all(procs.map((p) => new Response(p.stderr).text()));
  expect({ codes, errs }).toEqual({ codes: [0, 0], errs: ["", ""] });
  return outs.map((path) => JSON.parse(readFileSync(path, "utf8")) as T) as [T, T];
}

async function freePort(): Promise<number> {
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = server.port;
  server.stop(true);
  return port;
}

/**
 * How far the ranks' updated weights are from the single-rank ones beyond what their gradients
 * allow (<= 0: within). The two gradients are sums of the same terms in another order, so they
 * differ by rounding (checked above, 1e-5 of each parameter's largest entry; by how much depends
 * on the BLAS: MKL in PyTorch wheels, OpenBLAS in Debian's). AdamW's first step moves a weight by
 * lr * g / (|g| + eps) (clipping scales g by c <= 1), whose derivative is at most lr / (|g| + eps):
 * an entry whose gradient is near 0 turns a rounding-sized |dg| into up to lr * |dg| / eps. So each
 * weight may differ by lr * |dg| / (min |g| + eps), plus the float32 rounding of the update (2 ulps of
 * lr, its largest size) and of the stored weight (2 ulps).
 */
function adamBoundExcess(
  ranks: Pick<RankOutput, "grads" | "params">,
  single: { grads: Map<string, Float64Array>; params: Map<string, Float64Array> },
  lr: number,
): number {
  const eps = 1e-8;
  let worst = -Infinity;
  for (const [name, p] of single.params) {
    const [g, gr, pr] = [single.grads.get(name)!, ranks.grads[name]!, ranks.params[name]!];
    for (let i = 0; i < p.length; i++) {
      const ulp = Math.max(Math.abs(p[i]!), 1e-30) * 2 ** -23;
      const rounding = 2 * ulp + 2 * lr * 2 ** -23;
      const allowed = (lr * Math.abs(gr[i]! - g[i]!)) / (Math.min(Math.abs(g[i]!), Math.abs(gr[i]!)) + eps) + rounding;
      worst = Math.max(worst, Math.abs(pr[i]! - p[i]!) - allowed);
    }
  }
  return worst;
}

/** Largest |a - b| over every entry, relative to max(1e-3, largest |b|) of the same parameter. */
function worstRelative(a: Record<string, number[]>, b: Map<string, Float64Array>): number {
  let worst = 0;
  for (const [name, y] of b) {
    const x = a[name]!;
    const scale = Math.max(1e-3, ...Array.from(y, Math.abs));
    for (let i = 0; i < y.length; i++) worst = Math.max(worst, Math.abs(x[i]! - y[i]!) / scale);
  }
  return worst;
}

function maxAbsDiff(a: Record<string, number[]>, b: Map<string, Float64Array>): number {
  let worst = 0;
  for (const [name, y] of b) y.forEach((v, i) => (worst = Math.max(worst, Math.abs(a[name]![i]! - v))));
  return worst;
}

async function singleRank(loss: RlLoss = LOSS, mixed = false) {
  using model = await tinyModel({ seed: 3 });
  const initial = readParams(model);
  using optimizer = NativeOptimizer.create(model);
  const inner = nativeLearner(model, optimizer);
  let grads = new Map<string, Float64Array>();
  const result: StepResult = trainStep(
    {
      trainRow: inner.trainRow,
      optimizerStep: (lr, clip) => ((grads = readGrads(model)), inner.optimizerStep(lr, clip)),
    },
    distStep(mixed),
    { ...STEP_OPTIONS, losses: mixed ? MIXED_LOSSES : [loss] },
  );
  return { initial, grads, params: readParams(model), metrics: result.metrics };
}

describe.skipIf(!gloo)("two Gloo ranks", () => {
  test("gradient and updated weights equal the single-rank step; broadcast makes the ranks identical", async () => {
    const [r0, r1] = await twoRankStep("step");
    const single = await singleRank();

    // Rank 1 started from other weights: verify said so, the broadcast fixed it.
    expect(r1!.verifyBefore).toMatch(/rank 1 of 2: \d+ of \d+ parameters differ across ranks \(first: /);
    // Both ranks trained, the same number of micro-batches, the whole step between them.
    expect(r0!.rowsTrained).toBe(r1!.rowsTrained);
    expect(r0!.rowsTrained).toBeGreaterThan(1);
    expect(r0!.metrics.micro_batches).toBe(r0!.rowsTrained);
    // One all-reduced gradient: identical on both ranks, equal to the single-rank one.
    expect(r0!.grads).toEqual(r1!.grads);
    expect(r0!.params).toEqual(r1!.params);
    expect(worstRelative(r0!.grads, single.grads)).toBeLessThan(1e-5);
    expect(adamBoundExcess(r0!, single, STEP_OPTIONS.lr)).toBeLessThanOrEqual(0);
    // ... to within 1e-3 of what the step moved them (AdamW's first step: about lr = 1e-3 each).
    expect(maxAbsDiff(r0!.params, single.initial)).toBeGreaterThan(5e-4);
    expect(maxAbsDiff(r0!.params, single.params)).toBeLessThan(1e-6);
    // The logged step is the whole step's on every rank: loss, counts, grad norm.
    for (const key of ["count/rl", "count/ce", "count/ref_kl", "count/distill", "tokens"])
      expect(r0!.metrics[key]).toBe(single.metrics[key]!);
    for (const key of ["loss", "loss/rl", "loss/ce", "loss/ref_kl", "loss/distill", "grad_norm", "entropy"]) {
      expect(r0!.metrics[key]).toBeCloseTo(single.metrics[key]!, 5);
    }
    expect(single.metrics["count/ce"]).toBeGreaterThan(0);
    expect(single.metrics["count/ref_kl"]).toBeGreaterThan(0);
    expect(single.metrics["count/distill"]).toBeGreaterThan(0);
    expect(single.metrics["loss/distill"]).toBeGreaterThan(0.01);
    expect(r0!.metrics.world_size).toBe(2);
    expect(r0!.metrics["balance/max_over_mean"]).toBeGreaterThanOrEqual(1);
  }, 90_000);

  test("LoRA: the adapters' all-reduced gradient equals the single-rank one; the base does not move", async () => {
    type LoraOutput = RankOutput & { loraGrads: Record<string, number[]>; loraParams: Record<string, number[]> };
    const [r0, r1] = await twoRankStep<LoraOutput>("lora", { lora: true });
    // the single-rank step from rank 0's weights and adapters (seed 7), which the broadcast gave rank 1
    using model = await tinyModel({ seed: 3 });
    model.addLora(DIST_LORA, 7);
    const initial = readParams(model);
    using optimizer = NativeOptimizer.create(model);
    const inner = nativeLearner(model, optimizer);
    let grads = new Map<string, Float64Array>();
    trainStep(
      {
        trainRow: inner.trainRow,
        optimizerStep: (lr, clip) => ((grads = readLoraGrads(model)), inner.optimizerStep(lr, clip)),
      },
      distStep(),
      STEP_OPTIONS,
    );
    expect(r0!.loraGrads).toEqual(r1!.loraGrads);
    expect(r0!.loraParams).toEqual(r1!.loraParams);
    expect(worstRelative(r0!.loraGrads, grads)).toBeLessThan(1e-5);
    expect(maxAbsDiff(r0!.loraParams, readLoraParams(model))).toBeLessThan(1e-6);
    expect(maxAbsDiff(r0!.params, initial)).toBe(0); // frozen base, on every rank
    expect(maxAbsDiff(r1!.params, initial)).toBe(0);
  }, 90_000);

  // The other reductions divide by samples with an rl member over the whole step (all-reduced
  // with the token counts), and each sample's own count is known in its row.
  for (const [reduction, type] of [
    ["sequence", "icepop"],
    ["constant", "seq_tis"],
  ] as const)
    test(`the ${reduction} reduction (${type}): two ranks' gradient equals the single-rank one`, async () => {
      const loss = rlLoss({ type, reduction, constant: 13 });
      const [r0, r1] = await twoRankStep(reduction, { loss });
      const single = await singleRank(loss);
      expect(r0!.grads).toEqual(r1!.grads);
      expect(worstRelative(r0!.grads, single.grads)).toBeLessThan(1e-5);
      expect(r0!.metrics.loss).toBeCloseTo(single.metrics.loss!, 5);
      const token = await singleRank({ ...loss, reduction: "token" });
      expect(Math.abs(token.metrics.loss! - single.metrics.loss!)).toBeGreaterThan(1e-6);
    }, 90_000);

  // Each sample's loss code travels with it when balancing splits rows; the sequence-level types'
  // per-sample sums stay in one row, so the ranks' sum is the single rank's step.
  test("five loss types in one step: two ranks' gradient equals the single-rank one", async () => {
    const [r0, r1] = await twoRankStep("mixed", { mixed: true });
    const single = await singleRank(LOSS, true);
    expect(r0!.grads).toEqual(r1!.grads);
    expect(worstRelative(r0!.grads, single.grads)).toBeLessThan(1e-5);
    expect(r0!.metrics.loss).toBeCloseTo(single.metrics.loss!, 5);
    // the table changed the step: not the default loss's gradient
    const plain = await singleRank(LOSS);
    expect(Math.abs(plain.metrics.loss! - single.metrics.loss!)).toBeGreaterThan(1e-6);
    expect(single.metrics["clipped/high"]! + single.metrics["clipped/low"]!).toBeGreaterThan(0);
  }, 90_000);

  test("a non-finite loss on one rank makes every rank skip the update", async () => {
    const store = { type: "file", path: join(dir, "store-nan") };
    const outs = [0, 1].map((rank) => join(dir, `nan${rank}.json`));
    const { procs } = await startRanks(
      [0, 1].map((rank) => ({ rank, worldSize: 2, store, mode: "nan", out: outs[rank] })),
    );
    expect(await Promise.all(procs.map((p) => p.exited))).toEqual([0, 0]);
    const [r0, r1] = outs.map((path) => JSON.parse(readFileSync(path, "utf8")) as RankOutput);
    using model = await tinyModel({ seed: 3 });
    const initial = readParams(model);
    for (const r of [r0!, r1!]) {
      expect(r.metrics.skipped).toBe(1);
      expect(maxAbsDiff(r.params, initial)).toBe(0);
    }
  }, 90_000);

  /** Rank 0's exit code and error, and its seconds from the joining (not from the spawn). */
  async function survivor(mode: "die" | "hang", store: Json, timeoutMs: number) {
    const { procs, joined } = await startRanks([0, 1].map((rank) => ({ rank, worldSize: 2, store, mode, timeoutMs })));
    const code0 = await procs[0]!.exited;
    const seconds = (performance.now() - joined) / 1000;
    // whether rank 1 was gone by then (a "die" rank kills itself), before this test ends it
    const gone1 = await Promise.race([procs[1]!.exited.then(() => true), Bun.sleep(2000).then(() => false)]);
    const signal1 = procs[1]!.signalCode;
    procs[1]!.kill(9);
    await procs[1]!.exited;
    return { code0, gone1, signal1, seconds, stderr: await new Response(procs[0]!.stderr).text() };
  }

  test("a rank that dies mid-step (TCP store) fails the other with a named error at once", async () => {
    const { code0, gone1, signal1, seconds, stderr } = await survivor(
      "die",
      { type: "tcp", host: "127.0.0.1", port: await freePort() },
      600_000,
    );
    expect({ gone1, signal1 }).toEqual({ gone1: true, signal1: "SIGKILL" });
    expect(code0).toBe(1);
    expect(stderr).toMatch(/^rank 0 of 2: (gradient )?all-reduce.* failed: .*(closed|reset)/m);
    expect(stderr).toContain("fix: end every rank and restart them");
    // a tenth of the 600 s timeout, however loaded the machine: a dead peer is seen at once
    expect(seconds).toBeLessThan(60);
  }, 90_000);

  test("a rank that stops answering fails the other after timeoutMs, not later", async () => {
    const { code0, seconds, stderr } = await survivor("hang", { type: "file", path: join(dir, "store-hang") }, 10_000);
    expect(code0).toBe(1);
    expect(stderr).toMatch(/^rank 0 of 2: all-reduce of 5 values failed: .*Timed out.*timeout_ms = 10000/m);
    // rank 0's all-reduce began after the joining, so the timeout cannot end it sooner; rank 1
    // sleeps 120 s, so nothing but the timeout ends it before 60 s
    expect(seconds).toBeGreaterThanOrEqual(10);
    expect(seconds).toBeLessThan(60);
  }, 90_000);
});

test("a dummy row (balance.ts) trains to zero loss and an all-zero gradient", async () => {
  using model = await tinyModel({ seed: 4 });
  for (const row of [dummyRow(), dummyRow({ padMultiple: 8, padTokenId: 3 })]) {
    const out = trainRow(model, row, { nRl: 5, nCe: 1, nRefKl: 1 });
    expect(out.all.loss).toBe(0);
    expect(out.all.rlCount + out.all.ceCount + out.all.refKlCount).toBe(0);
    for (const g of readGrads(model).values()) expect(g.every((x) => x === 0)).toBe(true);
  }
});

describe.skipIf(!gloo)("a one-rank group in this process", () => {
  test("collectives are the identity; bad arguments and a missing peer are named errors", async () => {
    using group = await ProcessGroup.create({
      rank: 0,
      worldSize: 1,
      store: { type: "file", path: join(dir, "store-one") },
      timeoutMs: 5000,
    });
    const counts = BigInt64Array.of(3n, 2n ** 60n);
    group.allreduceCounts(counts);
    expect(Array.from(counts)).toEqual([3n, 2n ** 60n]);
    const sums = Float32Array.of(1.5, -2);
    group.allreduce(sums, "max");
    expect(Array.from(sums)).toEqual([1.5, -2]);
    group.barrier();
    using model = await tinyModel({ seed: 9 });
    const before = readParams(model);
    group.broadcastParams(model, 0);
    group.verifyParams(model);
    expect(readParams(model)).toEqual(before);
    // No gradient yet: the all-reduce gives every parameter a zero one.
    group.allreduceGrads(model);
    for (const g of readGrads(model).values()) expect(g.every((x) => x === 0)).toBe(true);
    expect(() => group.broadcastParams(model, 1)).toThrow(/root must be in 0..0, got 1/);

    await expect(
      ProcessGroup.create({ rank: 2, worldSize: 2, store: { type: "file", path: join(dir, "x") } }),
    ).rejects.toThrow(/rank must be in 0..1, got 2/);
    await expect(
      ProcessGroup.create({
        rank: 0,
        worldSize: 1,
        backend: "mpi" as "gloo",
        store: { type: "file", path: join(dir, "y") },
      }),
    ).rejects.toThrow(/unknown backend "mpi"/);
    await expect(
      ProcessGroup.create({ rank: 0, worldSize: 1, backend: "nccl", store: { type: "file", path: join(dir, "z") } }),
    ).rejects.toThrow(/no NCCL process groups/);
    const started = performance.now();
    await expect(
      ProcessGroup.create({
        rank: 0,
        worldSize: 2,
        store: { type: "file", path: join(dir, "alone") },
        timeoutMs: 1000,
      }),
    ).rejects.toThrow(/rank 0 of 2: the gloo rendezvous over file .* failed \(did every rank start/);
    expect(performance.now() - started).toBeLessThan(10_000);
    group.free();
    expect(() => group.barrier()).toThrow(/freed/);
  }, 60_000);
});
