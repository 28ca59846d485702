// Sharded checkpoints (src/rundir/shard_checkpoint.ts, shard_restore.ts) in float64 on `tiny` with
// dist_batch.ts's mixed rows: 2 ranks train 2 steps and write one, which is resumed on 1, 3 and 4
// ranks ("full"; "optimizer" 2 -> 1; unsharded 2 -> 1; and 1 -> 2) and trained 2 more steps: the weights and
// the AdamW state equal an uninterrupted 4-step run within 1e-10 relative. A byte flipped in one
// rank file is refused naming the file and the tensor, by readCheckpoint (every rank, before
// training), by the restore itself (which then leaves the model as it was) and by `rlx check`; a
// rank failing its part of the write fails every rank's, leaving no checkpoint.
import { afterAll, describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hfConfigObject } from "../../src/model/config.ts";
import { distAvailable, ProcessGroup } from "../../src/native/dist.ts";
import type { ShardMode } from "../../src/native/model.ts";
import { NativeOptimizer } from "../../src/native/train.ts";
import { CheckpointError, latestCheckpoint, openCheckpoint, readCheckpoint } from "../../src/rundir/checkpoint.ts";
import { checkpointDir } from "../../src/rundir/paths.ts";
import { checkShards, readShardsFile, SHARDS_FILE, weightsFile } from "../../src/rundir/shard_format.ts";
import { restoreShardedCheckpoint, restoreWholeCheckpoint } from "../../src/rundir/shard_restore.ts";
import { checkRunDir } from "../../src/rundir/verify.ts";
import { runRanks, type ShardRankArgs, type ShardRankOutput } from "./fixtures/shard_rank.ts";
import { adamState, maxRel } from "./fixtures/shard_state.ts";
import { readParams, TINY, tinyModel } from "./tiny_model.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-shard-ckpt-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const gloo = await distAvailable("gloo");
const sourceDir = join(dir, "model");
mkdirSync(sourceDir);
const config = { modelType: "llama" as const, shim: TINY, torchDtype: undefined, source: {} };
writeFileSync(join(sourceDir, "config.json"), JSON.stringify(hfConfigObject(config, "float32")));
writeFileSync(join(sourceDir, "tokenizer_config.json"), "{}");
let runs = 0;

type Extra = Pick<ShardRankArgs, "steps" | "resume" | "checkpoint" | "resumeWhole">;

/** Every rank's output, or the ranks' stderr when one fails. */
async function run(worldSize: number, shard: ShardMode, extra: Extra): Promise<ShardRankOutput[] | string> {
  const id = `${runs++}`;
  const store = { type: "file" as const, path: join(dir, `store-${id}`) };
  return runRanks(dir, id, { worldSize, store, shard, ...extra }, true);
}

async function outputs(worldSize: number, shard: ShardMode, extra: Extra): Promise<ShardRankOutput[]> {
  const outs = await run(worldSize, shard, extra);
  if (typeof outs === "string") throw new Error(`a rank failed:\n${outs}`);
  return outs;
}

/** A 2-step run of `world` ranks that writes its checkpoint into a fresh run directory. */
async function checkpointed(world: number, shard: ShardMode): Promise<{ runDir: string; outs: ShardRankOutput[] }> {
  const runDir = join(dir, `run-${runs}`);
  const outs = await outputs(world, shard, { steps: 2, checkpoint: { runDir, step: 2, sourceDir } });
  return { runDir, outs };
}

function expectSame(outs: ShardRankOutput[], reference: ShardRankOutput[]): void {
  const names = Object.keys(reference[0]!.params);
  for (const out of outs) expect(maxRel(out.params, reference[0]!.params)).toBeLessThan(1e-10);
  const state = adamState(outs, names);
  expect(state.size).toBe(names.length);
  expect(maxRel(state, adamState(reference, names))).toBeLessThan(1e-10);
}

describe.skipIf(!gloo)("sharded checkpoints", () => {
  let reference: ShardRankOutput[];
  let fullRun: string;
  let ckpt: string;
  let atStep2: ShardRankOutput[];

  test("2 ranks write one: shards, small files, manifest", async () => {
    reference = await outputs(2, "full", { steps: 4 });
    ({ runDir: fullRun, outs: atStep2 } = await checkpointed(2, "full"));
    ckpt = checkpointDir(fullRun, 2);
    expect(readdirSync(join(fullRun, "checkpoints"))).toEqual(["step_2"]);
    expect(readdirSync(join(ckpt, "trainer/shards")).sort()).toEqual([
      "rank_0.optimizer.bin",
      "rank_0.weights.bin",
      "rank_1.optimizer.bin",
      "rank_1.weights.bin",
    ]);
    expect(readdirSync(join(ckpt, "trainer/model")).sort()).toEqual(["config.json", "tokenizer_config.json"]);
    const loaded = readCheckpoint(ckpt);
    expect(loaded.sharded).toBe(join(ckpt, "trainer/shards.json"));
    expect(loaded.orchestratorState).toEqual({ step: 2 });
    expect(() => loaded.optimizerState()).toThrow(CheckpointError);
    const shards = readShardsFile(ckpt);
    expect([shards.world, shards.mode, shards.dtype, shards.adamStep]).toEqual([2, "full", "f64", 2]);
    expect(checkRunDir(fullRun).every((item) => item.status === "ok")).toBe(true);
  }, 60_000);

  for (const [world, shard] of [
    [1, "full"],
    [3, "full"], // no unit of `tiny` divides by 3: padded slices, pieces cut mid-tensor
    [4, "full"],
    [1, "optimizer"],
    [1, "none"],
  ] as const) {
    test(`resumed on ${world} rank(s), shard "${shard}", equals 4 uninterrupted steps`, async () => {
      expectSame(await outputs(world, shard, { steps: 2, resume: ckpt }), reference);
    }, 60_000);
  }

  test("into an unsharded float32 model (an export): the step-2 weights", async () => {
    using model = await tinyModel({ seed: 0, dtype: "f32" });
    restoreWholeCheckpoint(ckpt, model);
    const params = Object.fromEntries([...readParams(model)].map(([k, v]) => [k, Array.from(v)]));
    expect(maxRel(params, atStep2[0]!.params)).toBeLessThan(1e-6);
  });

  test('"optimizer" on 2 ranks, resumed on 1', async () => {
    const { runDir } = await checkpointed(2, "optimizer");
    expectSame(await outputs(1, "optimizer", { steps: 2, resume: checkpointDir(runDir, 2) }), reference);
  }, 60_000);

  test('an unsharded run\'s state resumed on 2 ranks ("full"): its AdamW image cut to the slices', async () => {
    const [whole] = await outputs(1, "none", { steps: 2 });
    const optimizer = join(dir, "whole-optimizer.bin");
    writeFileSync(optimizer, Uint8Array.from(whole!.optimizer));
    const output = join(dir, "whole-output.json");
    writeFileSync(output, JSON.stringify(whole));
    expectSame(await outputs(2, "full", { steps: 2, resumeWhole: { output, optimizer } }), reference);
  }, 60_000);

  test('1 rank, resumed on 2 ("full")', async () => {
    const { runDir } = await checkpointed(1, "full");
    expectSame(await outputs(2, "full", { steps: 2, resume: checkpointDir(runDir, 2) }), reference);
  }, 60_000);

  test("a flipped byte in a rank file is refused naming the file and the tensor", async () => {
    const damagedRun = join(dir, "damaged");
    cpSync(fullRun, damagedRun, { recursive: true });
    const damaged = checkpointDir(damagedRun, 2);
    const shards = readShardsFile(damaged);
    // rank 1's first tensor piece of layer 0: the byte 3 elements into it
    const unit = shards.units[1]!;
    const element = shards.ranks[1]!.ranges[1]![0] + 3;
    const tensor = unit.params.find(
      (t) => t.offset <= element && element < t.offset + t.shape.reduce((a, b) => a * b),
    )!;
    const file = join(damaged, weightsFile(1));
    const bytes = readFileSync(file);
    const at = shards.units[0]!.chunk * 8 + 3 * 8 + 5;
    bytes[at] = bytes[at]! ^ 0x10;
    writeFileSync(file, bytes);
    const named = [weightsFile(1), tensor.name];

    expect(() => readCheckpoint(damaged)).toThrow(CheckpointError);
    try {
      readCheckpoint(damaged);
    } catch (err) {
      for (const part of named) expect((err as Error).message).toContain(part);
    }
    const item = checkRunDir(damagedRun).find((i) => i.path === "checkpoints/step_2")!;
    expect(item.status).toBe("damaged");
    for (const part of named) expect(item.problems.join("; ")).toContain(part);
    for (const [runDir, code] of [
      [fullRun, 0],
      [damagedRun, 1],
    ] as const) {
      const cli = Bun.spawn([process.execPath, join(import.meta.dir, "../../src/main.ts"), "check", runDir], {
        stdout: "pipe",
      });
      const out = await new Response(cli.stdout).text();
      expect(await cli.exited).toBe(code);
      if (code) for (const part of named) expect(out).toContain(part);
    }
    const failed = await run(2, "full", { steps: 2, resume: damaged });
    expect(typeof failed).toBe("string");
    for (const part of named) expect(failed as string).toContain(part);

    // the restore checks the pieces it reads itself, and writes nothing when one is damaged
    using model = await tinyModel({ seed: 3, dtype: "f64" });
    using group = await ProcessGroup.create({
      rank: 0,
      worldSize: 1,
      store: { type: "file", path: join(dir, "store-one") },
    });
    group.shard(model, "full");
    using optimizer = NativeOptimizer.create(model);
    const before = readParams(model);
    let caught: unknown;
    try {
      restoreShardedCheckpoint(openCheckpoint(damaged).dir, model, optimizer, group);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(CheckpointError);
    for (const part of named) expect((caught as Error).message).toContain(part);
    expect((caught as CheckpointError).fix).toContain("--resume");
    const after = readParams(model);
    for (const [name, values] of before) expect(after.get(name)).toEqual(values);

    // --resume skips it; a partial sharded checkpoint is deleted at the next start
    mkdirSync(join(damagedRun, "checkpoints/step_3.tmp-shards"));
    const warnings: string[] = [];
    expect(latestCheckpoint(damagedRun, (w) => warnings.push(w))).toBeUndefined();
    expect(existsSync(join(damagedRun, "checkpoints/step_3.tmp-shards"))).toBe(false);
    expect(warnings.join("\n")).toContain(tensor.name);
  }, 60_000);

  test("a rank failing to write fails every rank's write and leaves nothing", async () => {
    const runDir = join(dir, "failing");
    // rank 0 cannot finish: the model directory has no config.json
    const failed = await run(2, "full", { steps: 1, checkpoint: { runDir, step: 1, sourceDir: join(dir, "nowhere") } });
    expect(typeof failed).toBe("string");
    expect(failed as string).toContain("config.json: not found");
    expect(failed as string).toContain("rank 0 failed finishing");
    expect(readdirSync(join(runDir, "checkpoints"))).toEqual([]);
  }, 60_000);

  test("shards.json whose ranges do not cover a unit exactly is refused", () => {
    const edited = join(dir, "edited");
    cpSync(ckpt, edited, { recursive: true });
    const shards = readShardsFile(edited);
    shards.ranks[1]!.ranges[2]![0] += 1;
    writeFileSync(join(edited, SHARDS_FILE), JSON.stringify(shards));
    expect(checkShards(edited).join("; ")).toContain(`rank 1's range of unit ${shards.units[2]!.name}`);
    expect(() => readCheckpoint(edited)).toThrow(/trainer\/shards.json: checksum mismatch/);
  });
});
