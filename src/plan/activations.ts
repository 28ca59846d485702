// What one packed row's forward and backward keep in memory besides the weights, per rank, in
// bytes: the float32 tensors autograd saves in one decoder layer (native/src/layer.cpp and
// forward.cpp's attend_causal, as written; derived from the code, checked against
// bench/shard_memory.ts), the layer inputs activation checkpointing keeps (native/src/trunk.cpp),
// and the LM head's chunks (native/src/train.cpp, model.h chunk_tokens()).
//
// A row is planned as one sample of seq_len tokens: attention's memory grows with the square of a
// sample's length, so that is the worst packed row of seq_len tokens. Split over C
// context-parallel ranks, a rank keeps seq_len / C tokens' worth of all of it; its attention
// gathers the whole row's K and V while it runs, in the forward and again in the backward.
import type { ShimModelConfig } from "../model/config.ts";

const F32 = 4;

/** How attention runs under autograd: libtorch 1.13's blocks of 256 queries whose probabilities
 * are kept, or torch 2.x scaled_dot_product_attention (fused: no T x T probabilities kept). */
export type AttentionKind = "blocked" | "sdpa";

/** Queries per block of the hand-written attention (forward.cpp kQueryBlock). */
const QUERY_BLOCK = 256;

/** Float32 elements autograd keeps per token in one layer, outside attention's probabilities:
 * the layer input and the residual sum (x, h), the two RMSNorm outputs, q as projected, q-normed
 * and as attention reads it, attention's output, k as projected, k-normed and rotated, v, and the
 * MLP's gate, up, silu(gate) and their product. Without q/k norms only the rotated q and k stay
 * (the rotary multiply keeps cos/sin, not its input). */
export function layerFloatsPerToken(shape: ShimModelConfig): number {
  const h = shape.hidden_size;
  const q = shape.num_attention_heads * shape.head_dim;
  const kv = shape.num_key_value_heads * shape.head_dim;
  const qSaved = shape.qk_norm ? 4 * q : 2 * q;
  const kvSaved = shape.qk_norm ? 4 * kv : 2 * kv;
  return 4 * h + qSaved + kvSaved + 4 * shape.intermediate_size;
}

/** Attention's kept probabilities for one causal sample of n tokens (blocked kind): each block of
 * b queries keeps [heads, b, keys] float32 probabilities and a [b, keys] boolean mask, keys
 * running to the block's last query. */
export function attentionBytes(shape: ShimModelConfig, n: number, kind: AttentionKind): number {
  if (kind === "sdpa") return 0;
  const block = n <= QUERY_BLOCK ? n : QUERY_BLOCK;
  let bytes = 0;
  for (let start = 0; start < n; start += block) {
    const b = Math.min(block, n - start);
    const keys = start + b;
    bytes += b * keys * (F32 * shape.num_attention_heads + 1);
  }
  return bytes;
}

/** Elements of one block's scores in the split attention (native/src/context.cpp, block_queries). */
const CONTEXT_BLOCK_SCORES = 2 ** 21;

/** What the split attention (trainer.context_parallel > 1, native/src/context.cpp) keeps for one
 * layer besides layerFloatsPerToken's q and output: this rank's K and V side by side (the
 * backward gathers the row's from them again), and the log-sum-exp of its queries. */
export function contextAttentionBytes(shape: ShimModelConfig, ownTokens: number): number {
  const kv = shape.num_key_value_heads * shape.head_dim;
  return F32 * ownTokens * (2 * kv + shape.num_attention_heads);
}

/** Its backward's working set: the whole row's K and V gathered again and their gradient, and
 * a block's scores and their gradient. */
export function contextBackwardBytes(shape: ShimModelConfig, rowTokens: number): number {
  return F32 * (4 * shape.num_key_value_heads * shape.head_dim * rowTokens + 2 * CONTEXT_BLOCK_SCORES);
}

/** One layer's activations under autograd for a row of `tokens` tokens. */
export function layerActivationBytes(shape: ShimModelConfig, tokens: number, kind: AttentionKind): number {
  return F32 * tokens * layerFloatsPerToken(shape) + attentionBytes(shape, tokens, kind);
}

/** The working set of one layer's backward beyond its saved tensors: gradients of the MLP's
 * [T, intermediate] tensors and of the residual stream, and the softmax gradient of the largest
 * attention block. */
export function layerBackwardBytes(shape: ShimModelConfig, tokens: number, kind: AttentionKind): number {
  const linear = F32 * tokens * (2 * shape.intermediate_size + shape.hidden_size);
  const block = kind === "blocked" ? 2 * F32 * shape.num_attention_heads * Math.min(tokens, QUERY_BLOCK) * tokens : 0;
  return linear + block;
}

/** [T, hidden] float32 tensors around the LM head: the final norm's output, its detached copy's
 * gradient, the gradient sent into the trunk and the final norm's own. */
export function headActivationBytes(shape: ShimModelConfig, tokens: number): number {
  return 4 * F32 * tokens * shape.hidden_size;
}

/** Tokens per LM-head chunk (native/src/model.h chunk_tokens()). */
export function chunkTokens(vocab: number, device: "cpu" | "cuda"): number {
  const elements = device === "cuda" ? 2 ** 25 : 7 * 2 ** 20;
  return Math.max(16, Math.min(1024, Math.floor(elements / vocab)));
}

/** One chunk's float32 logits and the temporaries beside them (scaled logits, log-softmax, and
 * in the backward pass softmax and its gradient): about four [chunk, vocab] tensors. */
export function lmChunkBytes(shape: ShimModelConfig, device: "cpu" | "cuda"): number {
  return 4 * F32 * chunkTokens(shape.vocab_size, device) * shape.vocab_size;
}
