// The sampling client over SGLang's native API (POST /generate), for SGLang as the live policy
// (policy_engines.ts). Its OpenAI-compatible routes do not return the sampled token ids, which rlx
// needs (nothing the model produced is re-tokenized); /generate takes `input_ids` and answers each
// token as [logprob, token_id, text] in meta_info, as SGLang's sampling-parameters reference
// describes: `return_logprob`, `logprob_start_len` (0 = the prompt's logprobs too),
// `top_logprobs_num`, and in sampling_params `max_new_tokens`, `stop_token_ids`, `temperature`,
// `top_p`, `top_k` (-1 = off). The per-request seed is not sent (SGLang's sampling seed is a
// server setting in the versions this follows).
import { EndpointError } from "../errors.ts";
import { DEFAULT_HTTP, JsonEndpoint } from "./http.ts";
import type { Completion, CompletionRequest, SamplingClient, ScoredSequence, TopLogprobs } from "./types.ts";

/** [logprob, token id, text]; the first prompt token's logprob is null. */
type TokenEntry = [number | null, number, string | null];

interface GenerateResponse {
  meta_info?: {
    finish_reason?: { type?: string } | null;
    output_token_logprobs?: TokenEntry[];
    output_top_logprobs?: (TokenEntry[] | null)[];
    input_token_logprobs?: TokenEntry[];
    input_top_logprobs?: (TokenEntry[] | null)[];
  };
}

export interface SglangOptions {
  /** Server roots (no /v1). */
  baseUrls: string[];
  apiKey?: string;
}

const topOf = (entries: TokenEntry[] | null | undefined, own: number): TopLogprobs | null => {
  if (!entries) return null;
  const rank = entries.findIndex(([, id]) => id === own);
  return {
    ids: entries.map(([, id]) => id),
    logprobs: entries.map(([lp]) => lp ?? 0),
    rank: rank < 0 ? null : rank + 1,
  };
};

export class SglangClient implements SamplingClient {
  private readonly endpoints: JsonEndpoint[];
  private next = 0;

  constructor(options: SglangOptions) {
    if (options.baseUrls.length === 0) throw new EndpointError("no base URL for the SGLang policy");
    const headers: Record<string, string> = options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {};
    this.endpoints = options.baseUrls.map(
      (url) => new JsonEndpoint(url.replace(/\/+$/, ""), { ...DEFAULT_HTTP, headers }),
    );
  }

  private pick(): JsonEndpoint {
    return this.endpoints[this.next++ % this.endpoints.length]!;
  }

  async complete(request: CompletionRequest): Promise<Completion> {
    const endpoint = this.pick();
    const response = await endpoint.request<GenerateResponse>("/generate", {
      input_ids: request.promptIds,
      sampling_params: {
        max_new_tokens: request.maxTokens,
        temperature: request.temperature,
        top_p: request.topP,
        top_k: request.topK > 0 ? request.topK : -1,
        stop_token_ids: request.stop,
      },
      return_logprob: true,
      ...(request.topLogprobs ? { top_logprobs_num: request.topLogprobs } : {}),
    });
    const meta = response.meta_info;
    const entries = meta?.output_token_logprobs;
    if (!entries)
      throw new EndpointError(`${endpoint.url}/generate: the answer has no meta_info.output_token_logprobs`);
    const tokenIds = entries.map(([, id]) => id);
    const completion: Completion = {
      tokenIds,
      logprobs: entries.map(([lp]) => lp ?? 0),
      finishReason: meta.finish_reason?.type === "length" ? "length" : "stop",
      policyVersion: 0,
    };
    if (request.topLogprobs) {
      const tops = meta.output_top_logprobs ?? [];
      completion.topLogprobs = tokenIds.map((id, i) => topOf(tops[i], id) ?? { ids: [], logprobs: [], rank: null });
    }
    return completion;
  }

  async score(sequences: number[][]): Promise<number[][]> {
    return (await this.scoreTop(sequences, 0)).map((s) => s.logprobs);
  }

  /** Prompt logprobs (and the k most likely tokens) of every position, at temperature 1. */
  async scoreTop(sequences: number[][], k: number): Promise<ScoredSequence[]> {
    return Promise.all(
      sequences.map(async (tokenIds) => {
        const endpoint = this.pick();
        const response = await endpoint.request<GenerateResponse>("/generate", {
          input_ids: tokenIds,
          sampling_params: { max_new_tokens: 0, temperature: 1.0 },
          return_logprob: true,
          logprob_start_len: 0,
          ...(k > 0 ? { top_logprobs_num: k } : {}),
        });
        const entries = response.meta_info?.input_token_logprobs;
        if (!entries || entries.length !== tokenIds.length)
          throw new EndpointError(
            `${endpoint.url}/generate: expected ${tokenIds.length} input_token_logprobs, got ${entries?.length ?? "none"}`,
          );
        const tops = response.meta_info?.input_top_logprobs ?? [];
        return {
          logprobs: entries.map(([lp], i) => (i === 0 ? 0 : (lp ?? 0))),
          top: tokenIds.map((id, i) => (i === 0 || k === 0 ? null : topOf(tops[i], id))),
        };
      }),
    );
  }
}
