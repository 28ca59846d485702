// Sharded training (rlx.h "Sharded training", docs/scaling.md) against one replicated rank, in
// float64 on `tiny` with dist_batch.ts's mixed rl/ce/ref_kl/distill rows, two optimizer steps:
// the updated weights and the AdamW state (the ranks' slices put back together through the shard
// layout) equal the replicated run's within 1e-10 relative, for shard "none" with activation
// checkpointing on and off, "optimizer" and "full", on 1 rank (in this process) and on 2 and 4
// ranks (one process each, Gloo over a FileStore): the whole matrix, about 25 s.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { distAvailable } from "../../src/native/dist.ts";
import type { ShardMode } from "../../src/native/model.ts";
import { runShardRank, type ShardRankArgs, type ShardRankOutput } from "./fixtures/shard_rank.ts";
import { adamState, maxRel } from "./fixtures/shard_state.ts";

const FIXTURE = join(import.meta.dir, "fixtures/shard_rank.ts");
const dir = mkdtempSync(join(tmpdir(), "rlx-shard-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const gloo = await distAvailable("gloo");
let runs = 0;

async function run(worldSize: number, shard: ShardMode, checkpointing = false): Promise<ShardRankOutput[]> {
  const id = `${runs++}`;
  const store = { type: "file" as const, path: join(dir, `store-${id}`) };
  const args = (rank: number): ShardRankArgs => ({
    rank,
    worldSize,
    store,
    shard,
    checkpointing,
    out: join(dir, `out-${id}-${rank}.json`),
  });
  if (worldSize === 1) await runShardRank(args(0));
  else {
    const procs = Array.from({ length: worldSize }, (_, rank) =>
      Bun.spawn([process.execPath, FIXTURE, JSON.stringify(args(rank))], {
        env: { ...process.env, RLX_THREADS: "1" },
        stderr: "pipe",
      }),
    );
    for (const proc of procs)
      if ((await proc.exited) !== 0) throw new Error(`a rank failed:\n${await new Response(proc.stderr).text()}`);
  }
  return Array.from({ length: worldSize }, (_, rank) => JSON.parse(readFileSync(args(rank).out, "utf8")));
}

const MATRIX: [number, ShardMode, boolean][] = [1, 2, 4].flatMap((w) =>
  (["none", "optimizer", "full"] as const).flatMap((s) =>
    [false, true].map((c): [number, ShardMode, boolean] => [w, s, c]),
  ),
);

describe.skipIf(!gloo)("sharded training equals one replicated rank (float64)", async () => {
  let reference: ShardRankOutput[] | undefined;
  const replicated = async () => (reference ??= await run(1, "none"));
  for (const [world, shard, checkpointing] of MATRIX) {
    test(`${world} rank(s), shard "${shard}", activation checkpointing ${checkpointing ? "on" : "off"}`, async () => {
      const [base] = await replicated();
      const outs = await run(world, shard, checkpointing);
      const names = Object.keys(base!.params);
      for (const out of outs) {
        expect(maxRel(out.params, base!.params)).toBeLessThan(1e-10);
        expect(Math.abs(out.gradNorms[1]! / base!.gradNorms[1]! - 1)).toBeLessThan(1e-10);
      }
      const state = adamState(outs, names);
      expect(state.size).toBe(names.length);
      expect(maxRel(state, adamState([base!], names))).toBeLessThan(1e-10);
    }, 120_000);
  }
});
