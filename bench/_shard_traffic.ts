// The bytes the collectives of one sharded train step move (bench/shard_memory.ts), computed from
// the shard layout rather than measured: which units are gathered and reduce-scattered how often
// is fixed by native/src/trunk.cpp (the "full" mode's forward and recomputing backward) and
// native/src/shard_ops.cpp (the "optimizer" mode's optimizer step). Float32 units, one micro-batch
// a rank. A ring all-gather or reduce-scatter moves (N - 1) / N of its buffer through each rank, an
// all-reduce 2 (N - 1) / N; Gloo on libtorch 1.13 has no reduce-scatter and runs an all-reduce.
import type { ShardMode } from "../src/native/model.ts";

/** Per-rank chunks (elements) of the units: the whole padded unit is chunk * world. */
export interface UnitSizes {
  embed: number;
  layers: number[];
  head: number;
  tied: boolean;
}

export interface CollectiveBytes {
  /** Sum of the gathered buffers' bytes (the whole unit each time). */
  allGather: number;
  /** Sum of the reduce-scattered gradients' bytes (the whole unit each time). */
  reduceScatter: number;
  /** Sum of the all-reduced gradients' bytes (trainer.shard "none" over several ranks). */
  allReduce: number;
  /** What passes through each rank, ring algorithms, Gloo (reduce-scatter as an all-reduce). */
  perRankGloo: number;
}

const F32 = 4;

export function collectiveBytes(mode: ShardMode, world: number, units: UnitSizes, params: number): CollectiveBytes {
  const whole = (chunk: number) => chunk * world * F32;
  const layers = units.layers.reduce((a, c) => a + whole(c), 0);
  const all = whole(units.embed) + layers + whole(units.head);
  let allGather = 0;
  let reduceScatter = 0;
  let allReduce = 0;
  if (mode === "full") {
    // forward: embed, every layer, the head, the embedding again as the tied LM head; backward:
    // every layer again (recomputed). Gradients: the head, the tied LM head's, every layer, the embedding.
    const tied = units.tied ? whole(units.embed) : 0;
    allGather = whole(units.embed) + 2 * layers + whole(units.head) + tied;
    reduceScatter = whole(units.head) + tied + layers + whole(units.embed);
  } else if (mode === "optimizer") {
    allGather = all;
    reduceScatter = all;
  } else if (world > 1) allReduce = params * F32;
  const share = (world - 1) / world;
  return {
    allGather,
    reduceScatter,
    allReduce,
    perRankGloo: share * allGather + 2 * share * (reduceScatter + allReduce),
  };
}
