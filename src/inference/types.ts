// The sampling client interface: the only way the rollout driver and the algorithms talk to a
// model. Tokens in, tokens out: prompts are token ids and completions come back as token ids with
// their sampling logprobs, so nothing the model produced is ever re-tokenized. The HTTP client
// (OpenAI-compatible /v1/completions with token-id prompts, issue 6) and in-process clients over
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
}

export interface SamplingClient {
  complete(request: CompletionRequest): Promise<Completion>;
  /** Prompt logprobs of each sequence: one per token, the first token's is 0. */
  score(sequences: number[][]): Promise<number[][]>;
}
