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
import type { ShimModelConfig } from "../model/config.ts";
import {
  type AttentionKind,
  headActivationBytes,
  layerActivationBytes,
  layerBackwardBytes,
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

/** Runtime memory besides tensors: measured on the CPU (bench/shard_memory.ts, a rank before
 * its model is loaded); on a GPU the CUDA context, cuBLAS workspace and NCCL buffers, estimated. */
export const RUNTIME_BYTES: Record<PlanDevice, number> = { cpu: 0.25 * 2 ** 30, cuda: 1.5 * 2 ** 30 };

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

interface Moments {
  moments: Record<Moment, number>;
  activations: number;
  transients: { name: string; bytes: number }[];
}

export function planRow(input: PlanInput, shard: PlanShard, checkpointing: boolean): PlanRow {
  const { shape, seqLen: T, ranks: N, device } = input;
  const u = unitsOf(shape);
  const P = u.params;
  const recompute = checkpointing || shard === "full";
  const layerAct = layerActivationBytes(shape, T, input.attention);
  const layerInput = F32 * T * shape.hidden_size;
  const head = headActivationBytes(shape, T);
  const chunk = lmChunkBytes(shape, device);
  const back = layerBackwardBytes(shape, T, input.attention);
  const kept = recompute ? u.layers * layerInput : u.layers * layerAct;
  const largestTensor = Math.max(u.embed, shape.hidden_size * shape.intermediate_size);
  const file = device === "cpu" ? input.fileBytesPerParam * P : 0;
  const load = F32 * P + file;

  const weights = shard === "full" ? (F32 * P) / N : F32 * P;
  // AdamW's two moments, whole or a slice; "optimizer" mode also keeps a float32 master slice
  const optimizer = shard === "none" ? 2 * F32 * P : shard === "full" ? (2 * F32 * P) / N : (3 * F32 * P) / N;
  const gradients = shard === "full" ? (F32 * P) / N : F32 * P;
  const state = weights + optimizer;
  // the LM head's weight gradient: the tied embedding's or the untied lm_head's, whole
  // AdamW's temporaries on its largest tensor (the clipped gradient, sqrt(v), the denominator):
  // a whole parameter, or in "optimizer" mode the embedding's slice
  const adamTemporaries = shard === "optimizer" ? (3 * F32 * padded(u.embed, N)) / N : 3 * F32 * largestTensor;
  // replicated ranks sum their gradients in buckets that are all in flight at once
  // (native/src/dist_ops.cpp rlx_dist_allreduce_grads): a flat float32 copy of every gradient
  const allReduce = shard === "none" && N > 1 ? F32 * P : 0;
  const headGrad = F32 * (u.head + (shape.tie_word_embeddings ? u.embed : 0));
  const m: Moments =
    shard === "full"
      ? fullMoments()
      : {
          activations: kept + head,
          transients: [
            { name: "LM head chunk", bytes: chunk },
            { name: "AdamW temporaries", bytes: adamTemporaries },
            ...(shard === "optimizer"
              ? [{ name: "a unit's whole gradient (reduce-scatter)", bytes: F32 * padded(u.embed, N) }]
              : []),
            ...(allReduce ? [{ name: "gradient all-reduce buckets", bytes: allReduce }] : []),
          ],
          moments: {
            load,
            "lm head": state + kept + head + chunk + headGrad,
            // the last layer's backward (every activation still kept) or, recomputing, the first
            // layer's (every layer's gradient there): the two ends of a linear trade
            backward:
              state +
              back +
              Math.max(
                kept + headGrad + F32 * u.layer,
                recompute ? layerInput + layerAct + F32 * u.layers * u.layer + headGrad : 0,
              ),
            optimizer:
              state +
              gradients +
              (shard === "optimizer"
                ? (F32 * P) / N + Math.max(F32 * padded(u.embed, N), adamTemporaries)
                : Math.max(adamTemporaries, allReduce)),
          },
        };

  function fullMoments(): Moments {
    const gl = F32 * padded(u.layer, N);
    const ge = F32 * padded(u.embed, N);
    const gh = F32 * padded(u.head, N);
    const tiedHead = shape.tie_word_embeddings ? 2 * ge : 0; // gathered embedding + its gradient buffer
    const slices = (F32 * P) / N;
    return {
      activations: kept + head,
      transients: [
        { name: "LM head chunk", bytes: chunk },
        { name: "two gathered layers with gradient buffers", bytes: 4 * gl },
        ...(shape.tie_word_embeddings
          ? [{ name: "gathered tied embedding + its gradient", bytes: tiedHead + 2 * gh }]
          : [{ name: "gathered head + its gradient", bytes: 2 * gh }]),
        { name: "embedding's whole gradient", bytes: ge },
        { name: "AdamW temporaries", bytes: (3 * ge) / N },
      ],
      moments: {
        load,
        // the head unit (and the tied embedding) gathered with gradient buffers through the LM
        // head's passes and the reduce-scatters after them, the last layer's gather in flight
        "lm head": state + kept + head + 2 * gh + tiedHead + Math.max(chunk, 2 * gl),
        backward: Math.max(
          state + slices + kept + 4 * gl + layerAct + back,
          state + slices + ge + layerInput, // the embedding's backward: its whole gradient
        ),
        optimizer: state + slices + (3 * ge) / N,
      },
    };
  }

  const [peakAt, peak] = (Object.entries(m.moments) as [Moment, number][]).reduce((a, b) => (b[1] > a[1] ? b : a));
  const step = Math.max(...Object.entries(m.moments).map(([k, v]) => (k === "load" ? 0 : v)));
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
    total: runtime + peak,
    stepTotal: runtime + step,
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
