// What callers give the batching engine (src/engine/engine.ts) and get back: its options, one
// request, one result, and the two ways it can reload weights. Kept apart from the engine so that
// the HTTP layer and the in-process client read the contract without the scheduling code.
import type { FinishReason, SamplingParams, TopLogprobs } from "../native/generate.ts";
import type { CoreShare } from "../native/core_share.ts";
import type { NativeModel } from "../native/model.ts";

/** "drain": running sequences finish on the old weights first; "in-flight": they continue on the new. */
export type ReloadMode = "in-flight" | "drain";

export const RELOAD_MODES: readonly ReloadMode[] = ["in-flight", "drain"];

export interface EngineOptions {
  /** Sequences decoded together (generator slots). */
  maxBatch: number;
  /** Prompt plus generated tokens per sequence; default min(max_position_embeddings, 2048). */
  maxModelLen?: number;
  /** K/V cache tokens shared by the running sequences (at least maxModelLen); default: room for
   * maxBatch whole sequences of maxModelLen. A request is admitted when its prompt + max tokens
   * fit what is left, else it waits. */
  kvTokens?: number;
  /** Requests waiting for a slot before submit throws QueueFullError; default 16 x maxBatch. */
  maxQueue?: number;
  /** Prompt tokens prefilled in one pass: an admit batch holds at most this many (at least one
   * request), and a longer prompt is prefilled in passes of this many; default 8192. */
  maxPrefillTokens?: number;
  /** Most alternatives per token a request may ask for (vLLM's max_logprobs); default 20. */
  maxLogprobs?: number;
  /** The version of the weights the engine starts with; default 0. */
  version?: number;
  /** Whether close() and reloads free the starting model; default true (false: the caller owns it). */
  ownsModel?: boolean;
  /** How reloadWeights treats running sequences (src/engine/engine.ts explains both); default "drain". */
  reloadMode?: ReloadMode;
  /** A prompt may continue the K/V a slot kept from an earlier request (docs/serve.md); default
   * true. False: every prefill is a full one, so results do not depend on earlier requests. */
  prefixCaching?: boolean;
  /** Hands the cores between this engine and a trainer on the same machine (rlx train's policy). */
  coreShare?: CoreShare;
  /** Records every generator call to `path` (schedule.ts), `model` naming the starting weights. */
  schedule?: { path: string; model: string };
  /** Loads a weights directory for reloadWeights (default: src/model/hf.ts loadModel, lazily). */
  loadWeights?: (dir: string) => Promise<NativeModel>;
}

/** One sequence to generate. */
export interface EngineRequest {
  prompt: number[];
  sampling: SamplingParams;
  /** The caller's name for the request (a rollout id), kept in the schedule record. */
  tag?: string;
  /** Aborting cancels the request: it resolves with what it has, finish "abort". */
  signal?: AbortSignal;
  /** N > 0: each token comes with the N most likely tokens of the distribution it was sampled from. */
  topLogprobs?: number;
  /**
   * Called for each token as it is produced (`finish` set on the sequence's last token; `top` when
   * topLogprobs > 0); returning true ends the sequence there (finish "stop").
   */
  onToken?: (token: number, logprob: number, finish: FinishReason | null, top?: TopLogprobs) => boolean | void;
}

export type EngineFinish = FinishReason | "abort";

export interface EngineResult {
  tokens: number[];
  logprobs: number[];
  /** Per token, when the request asked for topLogprobs > 0. */
  topLogprobs?: TopLogprobs[];
  finish: EngineFinish;
  /** The weights version at admission: the oldest that produced any of the tokens. */
  version: number;
  /** The weights version that produced the last token (newer than `version` only after an in-flight reload). */
  versionEnd: number;
}
