// The memory a trainer rank needs, per trainer.shard mode and activation checkpointing, in bytes:
// what `rlx plan` prints (docs/scaling.md, "Memory planner"). Pure arithmetic over a model's shape
// and the layout of native/src/shard.h: float32 master weights (4 bytes a parameter), float32
// gradients (4), AdamW's two moments (8), activations (activations.ts).
//
// Gradients and activations never peak together: the backward frees a layer's activations as it
// fills that layer's gradients, and the optimizer step runs after both. So the total is the
// largest of the step's moments, each the sum of what is alive then:
//   load:      the whole float32 model, before any sharding (and, on a CPU, the safetensors file
//              mapped beside it: it counts in the resident set);
//   lm head:   every activation the backward will read, the LM head's chunk and gradient (a "full"
//              model: the gathered head unit, and the tied embedding, each with a gradient buffer);
//   backward:  a layer's backward, its gradients and the ones after it, the inputs before it;
//   optimizer: every gradient and the AdamW temporaries of its largest tensor ("optimizer" mode:
//              the whole gradient of one unit being reduce-scattered, and the slices' gradients;
//              replicated ranks: the all-reduce's flat copy of every gradient).
// On a GPU the total is the largest moment. On a CPU, glibc's heap (blocks under 32 MiB) keeps
// what it held, so the heap's largest moment and the mapped tensors' largest moment add up; the
// CPU terms were checked against bench/shard_memory.ts (test/unit/plan/measured.test.ts).
import type { ShimModelConfig } from "../model/config.ts";
import {
  attentionBytes,
  type AttentionKind,
  contextAttentionBytes,
  contextBackwardBytes,
  headActivationBytes,
  layerBackwardBytes,
  layerFloatsPerToken,
  lmChunkBytes,
} from "./activations.ts";

export type PlanShard = "none" | "optimizer" | "full";
export type PlanDevice = "cpu" | "cuda";
export type Moment = "load" | "lm head" | "backward" | "optimizer";

export interface PlanInput {
  shape: ShimModelConfig;
  seqLen: number;
  ranks: number;
  device: PlanDevice;
  attention: AttentionKind;
  /** trainer.context_parallel: ranks each row is split over (default 1). */
  contextParallel?: number;
  /** Bytes per parameter of the safetensors file (mapped while loading on a CPU). */
  fileBytesPerParam: number;
}

export interface PlanRow {
  shard: PlanShard;
  /** "full" always recomputes its layers. */
  checkpointing: boolean;
  weights: number;
  gradients: number;
  optimizer: number;
  /** The activations alive at the step's activation peak (before the backward frees them). */
  activations: number;
  transient: { name: string; bytes: number };
  /** The process itself: libtorch, Bun, a CUDA context. */
  runtime: number;
  /** runtime + the largest moment's sum. */
  total: number;
  /** runtime + the largest moment of the step itself (without loading). */
  stepTotal: number;
  peakAt: Moment;
}

const F32 = 4;

/** Runtime memory besides tensors: on a CPU measured (bench/shard_memory.ts: a rank's resident set
 * before its first step less its weights and AdamW state, 0.2-0.43 GiB); on a GPU the CUDA
 * context, cuBLAS workspace and NCCL buffers, estimated. */
export const RUNTIME_BYTES: Record<PlanDevice, number> = { cpu: 0.3 * 2 ** 30, cuda: 1.5 * 2 ** 30 };

/** glibc's heap holds blocks of many sizes side by side: its resident set runs over the live
 * bytes in it. Measured on the CPU rows of experiments/results/shard_memory/ (about 10%). */
const HEAP_FRAGMENTATION = 1.1;

/** Parameters per unit of the shard layout (shard.h): the embedding, each layer, the head. */
export function unitsOf(shape: ShimModelConfig) {
  const h = shape.hidden_size;
  const q = shape.num_attention_heads * shape.head_dim;
  const kv = shape.num_key_value_heads * shape.head_dim;
  const attention =
    2 * h * q + 2 * h * kv + (shape.attention_bias ? q + 2 * kv : 0) + (shape.qk_norm ? 2 * shape.head_dim : 0);
  const layer = attention + 3 * h * shape.intermediate_size + 2 * h;
  const embed = shape.vocab_size * h;
  const head = h + (shape.tie_word_embeddings ? 0 : embed);
  return {
    embed,
    layer,
    head,
    layers: shape.num_hidden_layers,
    params: embed + shape.num_hidden_layers * layer + head,
  };
}

/** A unit padded to a multiple of the world size (its flat, gathered whole). */
const padded = (numel: number, ranks: number) => Math.ceil(numel / ranks) * ranks;

/** Bytes in blocks under glibc's mmap threshold (native/src/heap.h), which the CPU allocator's
 * heap serves and keeps, and in larger ones, mapped and unmapped whole. */
interface Bytes {
  small: number;
  large: number;
}
/** The shim's threshold: 32 MiB, and 32 MiB / C while a row split over C ranks trains. */
const mmapThreshold = (split: number) => (32 * 2 ** 20) / split;
const NONE: Bytes = { small: 0, large: 0 };
/** `bytes` held in tensors of `tensorBytes` each, under a given mmap threshold. */
const partUnder =
  (threshold: number) =>
  (bytes: number, tensorBytes: number): Bytes =>
    tensorBytes < threshold ? { small: bytes, large: 0 } : { small: 0, large: bytes };
const sum = (...parts: Bytes[]): Bytes => ({
  small: parts.reduce((a, p) => a + p.small, 0),
  large: parts.reduce((a, p) => a + p.large, 0),
});
const total = (b: Bytes) => b.small + b.large;
/** The alternative that holds more (two exclusive states of one moment). */
const larger = (...alternatives: Bytes[]) => alternatives.reduce((a, b) => (total(b) > total(a) ? b : a));

interface Moments {
  moments: Record<Moment, Bytes>;
  activations: number;
  transients: { name: string; bytes: number }[];
}

export function planRow(input: PlanInput, shard: PlanShard, checkpointing: boolean): PlanRow {
  const { shape, seqLen: T, ranks: N, device } = input;
  const u = unitsOf(shape);
  const P = u.params;
  const H = shape.hidden_size;
  const I = shape.intermediate_size;
  const recompute = checkpointing || shard === "full";
  // context parallelism: this rank's tokens of a row (attention gathers the whole row's K/V only
  // while it runs: contextBackwardBytes)
  const split = input.contextParallel ?? 1;
  const part = partUnder(mmapThreshold(split));
  const own = Math.ceil(T / split);
  const kvOwn = F32 * 2 * shape.num_key_value_heads * shape.head_dim * own;
  const attention = split > 1 ? contextAttentionBytes(shape, own) : attentionBytes(shape, T, input.attention);
  const layerInput = F32 * own * H;
  const head = headActivationBytes(shape, own);
  const chunk = lmChunkBytes(shape, device);
  const E = F32 * u.embed; // the embedding (and an untied lm_head): one tensor
  const layers = F32 * u.layers * u.layer;
  const headRest = F32 * u.head - (shape.tie_word_embeddings ? 0 : E); // the final norm
  const lmHead = shape.tie_word_embeddings ? 0 : E;
  // one layer's autograd activations: [T, intermediate]-sized tensors and attention's blocks
  const layerAct = [
    part(F32 * own * layerFloatsPerToken(shape), F32 * own * I),
    part(attention, split > 1 ? kvOwn : F32 * shape.num_attention_heads * Math.min(T, 256) * T),
  ];
  const back =
    split > 1
      ? part(layerBackwardBytes(shape, own, "sdpa") + contextBackwardBytes(shape, T), F32 * own * I)
      : part(layerBackwardBytes(shape, T, input.attention), F32 * T * I);
  const kept = recompute
    ? [part(u.layers * layerInput, layerInput)]
    : layerAct.map((a) => ({ small: u.layers * a.small, large: u.layers * a.large }));
  const file = device === "cpu" ? part(input.fileBytesPerParam * P, 2 ** 40) : NONE;
  // whole tensors as loaded: the embedding and lm_head, each layer's joint gate_up buffer at most
  const whole = (bytesPerElement: number, layerTensor: number) => [
    part((bytesPerElement / F32) * (E + lmHead + headRest), E),
    part((bytesPerElement / F32) * layers, layerTensor),
  ];
  const load = sum(...whole(F32, F32 * 2 * I * H), file);

  const weights = shard === "full" ? (F32 * P) / N : F32 * P;
  // AdamW's two moments, whole or a slice; "optimizer" mode also keeps a float32 master slice
  const optimizer = shard === "none" ? 2 * F32 * P : shard === "full" ? (2 * F32 * P) / N : (3 * F32 * P) / N;
  const gradients = shard === "full" ? (F32 * P) / N : F32 * P;
  // this rank's slices of every unit: `copies` tensors of [chunk] each
  const slices = (copies: number) => [
    part((copies * (E + lmHead + headRest)) / N, E / N),
    part((copies * layers) / N, (F32 * u.layer) / N),
  ];
  const state =
    shard === "full"
      ? sum(...slices(3))
      : sum(...whole(F32, F32 * 2 * I * H), ...(shard === "optimizer" ? slices(3) : whole(2 * F32, F32 * I * H)));
  const grads = shard === "full" ? sum(...slices(1)) : sum(...whole(F32, F32 * I * H));
  const largestTensor = Math.max(E, F32 * I * H);
  // AdamW's temporaries on its largest tensor (the clipped gradient, sqrt(v), the denominator):
  // a whole parameter, or in "optimizer" mode the embedding's slice
  const adamTemporaries =
    shard === "none" ? part(3 * largestTensor, largestTensor) : part((3 * F32 * padded(u.embed, N)) / N, E / N);
  // replicated ranks sum their gradients in buckets that are all in flight at once
  // (native/src/dist_ops.cpp rlx_dist_allreduce_grads): a flat float32 copy of every gradient, in
  // 25 MiB buckets but for a larger tensor, which is a bucket alone
  const allReduce = shard === "none" && N > 1 ? sum(part(layers + headRest, 25 * 2 ** 20), part(E + lmHead, E)) : NONE;
  // the LM head's weight gradient: the tied embedding's or the untied lm_head's, whole
  const headGrad = part(E + headRest, E);
  const unitGrad = part(F32 * padded(u.embed, N), F32 * padded(u.embed, N));
  const m: Moments =
    shard === "full"
      ? fullMoments()
      : {
          activations: total(sum(...kept)) + head,
          transients: [
            { name: "LM head chunk", bytes: chunk },
            { name: "AdamW temporaries", bytes: total(adamTemporaries) },
            ...(shard === "optimizer"
              ? [{ name: "a unit's whole gradient (reduce-scatter)", bytes: total(unitGrad) }]
              : []),
            ...(N > 1 && shard === "none" ? [{ name: "gradient all-reduce buckets", bytes: total(allReduce) }] : []),
          ],
          moments: {
            load,
            "lm head": sum(state, ...kept, part(head, layerInput), part(chunk, chunk / 4), headGrad),
            // the last layer's backward (every activation still kept) or, recomputing, the first
            // layer's (every layer's gradient there): the two ends of a linear trade
            backward: larger(
              sum(state, back, ...kept, headGrad, part(F32 * u.layer, F32 * I * H)),
              recompute
                ? sum(state, back, part(layerInput, layerInput), ...layerAct, part(layers, F32 * I * H), headGrad)
                : NONE,
            ),
            optimizer:
              shard === "optimizer"
                ? // a unit's gradient being reduce-scattered, AdamW on the slices, or a unit being
                  // gathered back into the parameters (whole, and Gloo's flat buffer beside it)
                  sum(state, grads, ...slices(1), larger(unitGrad, adamTemporaries, sum(unitGrad, unitGrad)))
                : sum(state, grads, larger(adamTemporaries, allReduce)),
          },
        };

  function fullMoments(): Moments {
    const gathered = (numel: number, copies: number) => part(copies * F32 * padded(numel, N), F32 * padded(numel, N));
    const tiedHead = shape.tie_word_embeddings ? gathered(u.embed, 2) : NONE; // the embedding + its gradient buffer
    return {
      activations: total(sum(...kept)) + head,
      transients: [
        { name: "LM head chunk", bytes: chunk },
        { name: "two gathered layers with gradient buffers", bytes: total(gathered(u.layer, 4)) },
        {
          name: shape.tie_word_embeddings ? "gathered tied embedding + its gradient" : "gathered head + its gradient",
          bytes: total(sum(tiedHead, gathered(u.head, 2))),
        },
        { name: "embedding's whole gradient", bytes: total(gathered(u.embed, 1)) },
        { name: "AdamW temporaries", bytes: total(adamTemporaries) },
      ],
      moments: {
        load,
        // the head unit (and the tied embedding) gathered with gradient buffers through the LM
        // head's passes and the reduce-scatters after them, the last layer's gather in flight
        "lm head": sum(
          state,
          ...kept,
          part(head, layerInput),
          gathered(u.head, 2),
          tiedHead,
          // Gloo gathers into a flat buffer of its own and copies out: the tied embedding's gather
          // holds one more embedding meanwhile
          larger(part(chunk, chunk / 4), gathered(u.layer, 2), shape.tie_word_embeddings ? gathered(u.embed, 1) : NONE),
        ),
        backward: larger(
          sum(state, grads, ...kept, gathered(u.layer, 4), ...layerAct, back),
          sum(state, grads, gathered(u.embed, 1), part(layerInput, layerInput)), // the embedding's backward
        ),
        optimizer: sum(state, grads, adamTemporaries),
      },
    };
  }

  // On a CPU, blocks under the mmap threshold come from the heap, which keeps what it once held
  // (native/src/heap.h sets glibc's mallopt so): the resident peak is the heap's largest moment
  // plus the largest moment of the big (mmapped) tensors, not the largest moment of their sum. A
  // "full" rank's whole layers, loaded and then freed by sharding, stay in its heap besides: measured
  // (bench/shard_memory.ts), its resident set before the first step is 5.6 GiB against 3.8 live.
  const entries = Object.entries(m.moments) as [Moment, Bytes][];
  const freedAtShard = device === "cpu" && shard === "full" ? m.moments.load.small : 0;
  const peakOf = (list: [Moment, Bytes][]) =>
    device === "cpu"
      ? HEAP_FRAGMENTATION * (freedAtShard + Math.max(...list.map(([, b]) => b.small))) +
        Math.max(...list.map(([, b]) => b.large))
      : Math.max(...list.map(([, b]) => total(b)));
  const [peakAt] = entries.reduce((a, b) => (total(b[1]) > total(a[1]) ? b : a));
  const transient = m.transients.reduce((a, b) => (b.bytes > a.bytes ? b : a));
  const runtime = RUNTIME_BYTES[device];
  return {
    shard,
    checkpointing: recompute,
    weights,
    gradients,
    optimizer,
    activations: m.activations,
    transient,
    runtime,
    total: runtime + peakOf(entries),
    stepTotal: runtime + peakOf(entries.filter(([k]) => k !== "load")),
    peakAt,
  };
}

/** Every mode and checkpointing setting ("full" once: it always recomputes). */
export function planMemory(input: PlanInput): PlanRow[] {
  return [
    planRow(input, "none", false),
    planRow(input, "none", true),
    planRow(input, "optimizer", false),
    planRow(input, "optimizer", true),
    planRow(input, "full", true),
  ];
}
