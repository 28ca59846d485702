// The sampling client interface: the only way the rollout driver and the algorithms talk to a
// model. Tokens in, tokens out: prompts are token ids and completions come back as token ids with
// their sampling logprobs, so nothing the model produced is ever re-tokenized. The HTTP client
// (OpenAI-compatible /v1/completions with token-id prompts) and in-process clients over
// the native generator both implement it, so tests run the real driver against a real tiny model.

export interface CompletionRequest {
  promptIds: number[];
  maxTokens: number;
  temperature: number;
  topP: number;
  /** 0 or negative = disabled. */
  topK: number;
  /** Generation stops after emitting any of these token ids (the stop token is included). */
  stop: number[];
  seed?: number;
  /** N > 0: each completion token comes with the N most likely tokens of its distribution. */
  topLogprobs?: number;
  /** A key (the rollout id) that keeps every turn of a multi-turn rollout on one server, for its
   * prefix cache; clients over a single engine ignore it. */
  session?: string;
}

export type FinishReason = "stop" | "length";

export interface Completion {
  tokenIds: number[];
  /** Sampling logprob of each completion token, temperature-processed as the trainer computes it. */
  logprobs: number[];
  finishReason: FinishReason;
  /** The weights version that produced this completion. */
  policyVersion: number;
  /** Per completion token, when the request asked for topLogprobs > 0. */
  topLogprobs?: TopLogprobs[];
}

/** The most likely tokens of one position's distribution (most likely first), and the actual token's rank. */
export interface TopLogprobs {
  ids: number[];
  logprobs: number[];
  /** 1-based; null where the server does not report it. */
  rank: number | null;
}

/** One scored sequence with the top-k of every position (element 0: no prediction, null). */
export interface ScoredSequence {
  logprobs: number[];
  top: (TopLogprobs | null)[];
}

export interface SamplingClient {
  complete(request: CompletionRequest): Promise<Completion>;
  /** Prompt logprobs of each sequence: one per token, the first token's is 0. */
  score(sequences: number[][]): Promise<number[][]>;
  /** Prompt logprobs with the k most likely tokens of every position, at temperature 1 (optional: a
   * client that lacks it cannot serve top-k distillation). */
  scoreTop?(sequences: number[][], k: number): Promise<ScoredSequence[]>;
}
