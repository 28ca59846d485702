// The OpenAI-compatible sampling client, for the live policy (`rlx serve --policy`) and for
// frozen endpoints (teachers, sampling sources: rlx serve or vLLM). Tokens in, tokens out: the
// prompt is sent as token ids and the completion comes back as token ids (vLLM's
// `return_tokens_as_token_ids`, or its `token_ids` field) with their logprobs, never re-tokenized.
// Scoring uses vLLM's `prompt_logprobs`. Requests are spread round-robin over the base URLs; a
// `session` key (a rollout id) keeps a multi-turn rollout on one server for its KV cache.
import { EndpointError } from "../errors.ts";
import { DEFAULT_HTTP, type HttpOptions, JsonEndpoint } from "./http.ts";
import type {
  Completion,
  CompletionRequest,
  FinishReason,
  SamplingClient,
  ScoredSequence,
  TopLogprobs,
} from "./types.ts";

interface CompletionChoice {
  finish_reason: string | null;
  token_ids?: number[];
  logprobs?: {
    tokens?: string[];
    token_logprobs?: (number | null)[];
    /** Per completion token with logprobs = N: token ("token_id:N") -> logprob, N entries (vLLM may add the sampled one). */
    top_logprobs?: (Record<string, number> | null)[];
  } | null;
  prompt_logprobs?: (Record<string, { logprob: number; rank?: number | null }> | null)[] | null;
}

interface CompletionResponse {
  choices: CompletionChoice[];
  /** rlx serve: the weights version that produced the completion (absent on vLLM). */
  policy_version?: number;
}

export interface ClientOptions extends Partial<HttpOptions> {
  /** The model name the server serves (its /v1/models id). */
  model: string;
  /** One or more base URLs, each ending in /v1. */
  baseUrls: string[];
  apiKey?: string;
}

const MAX_SESSIONS = 10_000;

/** "token_id:123" (vLLM's return_tokens_as_token_ids) -> 123. */
function tokenId(token: string, where: string): number {
  const match = /^token_id:(\d+)$/.exec(token);
  if (!match)
    throw new EndpointError(
      `${where}: expected tokens as "token_id:N" (return_tokens_as_token_ids), got ${JSON.stringify(token)}`,
    );
  return Number(match[1]);
}

/** The N most likely tokens of each completion position, from logprobs.top_logprobs (most likely first). */
function topOfCompletion(choice: CompletionChoice, n: number, tokenIds: number[], where: string): TopLogprobs[] {
  const rows = choice.logprobs?.top_logprobs;
  if (!rows || rows.length !== tokenIds.length)
    throw new EndpointError(`${where}: asked for logprobs = ${n}, got ${rows?.length ?? "no"} top_logprobs rows`);
  return rows.map((row, i) => {
    const ranked = Object.entries(row ?? {})
      .map(([token, logprob]) => ({ id: tokenId(token, where), logprob }))
      .sort((a, b) => b.logprob - a.logprob)
      .slice(0, n);
    const rank = ranked.findIndex((e) => e.id === tokenIds[i]);
    return { ids: ranked.map((e) => e.id), logprobs: ranked.map((e) => e.logprob), rank: rank < 0 ? null : rank + 1 };
  });
}

export class OpenAIClient implements SamplingClient {
  private endpoints: JsonEndpoint[];
  private readonly sticky = new Map<string, JsonEndpoint>();
  private next = 0;

  constructor(readonly options: ClientOptions) {
    if (options.baseUrls.length === 0) throw new EndpointError(`no base URL for model ${options.model}`);
    const http: HttpOptions = {
      ...DEFAULT_HTTP,
      ...options,
      headers: options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {},
    };
    this.endpoints = options.baseUrls.map((url) => new JsonEndpoint(url.replace(/\/+$/, ""), http));
  }

  /** Stops sending requests to the server at `baseUrl` (a policy server the run lost). */
  drop(baseUrl: string): void {
    const url = baseUrl.replace(/\/+$/, "");
    this.endpoints = this.endpoints.filter((e) => e.url !== url);
    for (const [session, endpoint] of this.sticky) if (endpoint.url === url) this.sticky.delete(session);
  }

  /** Round-robin, or the server this session used before. */
  private pick(session?: string): JsonEndpoint {
    const held = session ? this.sticky.get(session) : undefined;
    if (held) return held;
    const endpoint = this.endpoints[this.next++ % this.endpoints.length]!;
    if (session) {
      // Bounded: the oldest sessions (long finished rollouts) are forgotten first.
      if (this.sticky.size >= MAX_SESSIONS) this.sticky.delete(this.sticky.keys().next().value!);
      this.sticky.set(session, endpoint);
    }
    return endpoint;
  }

  async complete(request: CompletionRequest): Promise<Completion> {
    const endpoint = this.pick(request.session);
    const body = {
      model: this.options.model,
      prompt: request.promptIds,
      max_tokens: request.maxTokens,
      temperature: request.temperature,
      top_p: request.topP,
      top_k: request.topK > 0 ? request.topK : -1,
      stop_token_ids: request.stop,
      seed: request.seed,
      ...(request.session === undefined ? {} : { user: request.session }),
      logprobs: request.topLogprobs ?? 0,
      return_tokens_as_token_ids: true,
      skip_special_tokens: false,
    };
    const response = await endpoint.request<CompletionResponse>("/completions", body);
    const choice = response.choices?.[0];
    const where = `${endpoint.url}/completions`;
    if (!choice?.logprobs?.token_logprobs)
      throw new EndpointError(
        `${where}: the response has no logprobs (is this an OpenAI-compatible completions server?)`,
      );
    const tokenIds = choice.token_ids ?? (choice.logprobs.tokens ?? []).map((t) => tokenId(t, where));
    const logprobs = choice.logprobs.token_logprobs.map((lp) => lp ?? 0);
    if (tokenIds.length !== logprobs.length)
      throw new EndpointError(`${where}: ${tokenIds.length} tokens but ${logprobs.length} logprobs`);
    const finishReason: FinishReason = choice.finish_reason === "length" ? "length" : "stop";
    const top = request.topLogprobs ? topOfCompletion(choice, request.topLogprobs, tokenIds, where) : undefined;
    return {
      tokenIds,
      logprobs,
      finishReason,
      policyVersion: response.policy_version ?? 0,
      ...(top ? { topLogprobs: top } : {}),
    };
  }

  /** Prompt logprobs of each sequence (the first token's is 0), via vLLM's prompt_logprobs. */
  async score(sequences: number[][]): Promise<number[][]> {
    return (await this.scoreTop(sequences, 0)).map((s) => s.logprobs);
  }

  /**
   * Prompt logprobs with the k most likely tokens of every position (temperature 1), via vLLM's
   * prompt_logprobs = k: each position's entries ranked 1..k, plus the prompt token's own.
   */
  async scoreTop(sequences: number[][], k: number): Promise<ScoredSequence[]> {
    return Promise.all(
      sequences.map(async (tokenIds) => {
        const endpoint = this.pick();
        const body = {
          model: this.options.model,
          prompt: tokenIds,
          max_tokens: 1,
          temperature: 1.0,
          prompt_logprobs: k,
        };
        const response = await endpoint.request<CompletionResponse>("/completions", body);
        const rows = response.choices?.[0]?.prompt_logprobs;
        const where = `${endpoint.url}/completions`;
        if (!rows || rows.length !== tokenIds.length) {
          throw new EndpointError(
            `${where}: expected ${tokenIds.length} prompt_logprobs, got ${rows?.length ?? "none"} (the server must support vLLM's prompt_logprobs)`,
          );
        }
        const logprobs: number[] = [];
        const top: (TopLogprobs | null)[] = [];
        rows.forEach((row, i) => {
          if (i === 0 || row === null) return (logprobs.push(0), top.push(null));
          const entry = row[String(tokenIds[i])];
          if (!entry) throw new EndpointError(`${where}: prompt_logprobs[${i}] lacks the prompt token ${tokenIds[i]}`);
          logprobs.push(entry.logprob);
          if (k === 0) return top.push(null);
          const ranked = Object.entries(row)
            .filter(([, e]) => typeof e.rank === "number" && e.rank >= 1 && e.rank <= k)
            .sort((a, b) => a[1].rank! - b[1].rank!);
          if (ranked.length < k)
            throw new EndpointError(
              `${where}: prompt_logprobs[${i}] has ${ranked.length} of the ${k} ranked alternatives`,
            );
          top.push({
            ids: ranked.map(([id]) => Number(id)),
            logprobs: ranked.map(([, e]) => e.logprob),
            rank: entry.rank ?? null,
          });
        });
        return { logprobs, top };
      }),
    );
  }

  /** Token ids of a text as the server's tokenizer encodes it (vLLM's /tokenize). */
  async tokenize(text: string): Promise<number[]> {
    const endpoint = this.pick();
    const root = endpoint.url.replace(/\/v1$/, "");
    const response = await new JsonEndpoint(root, endpoint.options).request<{ tokens: number[] }>("/tokenize", {
      model: this.options.model,
      prompt: text,
      add_special_tokens: false,
    });
    return response.tokens;
  }

  /**
   * The served model's card from /v1/models: its context length (vLLM's max_model_len) and, on
   * rlx serve, the tokenizer's id count, the model's vocabulary rows and the weights version.
   */
  async modelInfo(): Promise<{
    id: string;
    maxModelLen?: number;
    tokenizerSize?: number;
    vocabSize?: number;
    policyVersion?: number;
  }> {
    const endpoint = this.pick();
    type Card = {
      id: string;
      max_model_len?: number;
      tokenizer_size?: number;
      vocab_size?: number;
      policy_version?: number;
    };
    const response = await endpoint.request<{ data?: Card[] }>("/models");
    const card = response.data?.find((m) => m.id === this.options.model);
    if (!card)
      throw new EndpointError(
        `${endpoint.url}/models does not list the model ${JSON.stringify(this.options.model)} (it lists ${(response.data ?? []).map((m) => JSON.stringify(m.id)).join(", ") || "nothing"})`,
        { fix: "set the model name to one the server serves" },
      );
    return {
      id: card.id,
      maxModelLen: card.max_model_len,
      tokenizerSize: card.tokenizer_size,
      vocabSize: card.vocab_size,
      policyVersion: card.policy_version,
    };
  }

  /** Number of ids the server's tokenizer can produce (rlx serve says; vLLM does not: undefined). */
  async vocabSize(): Promise<number | undefined> {
    return (await this.modelInfo()).tokenizerSize;
  }
}
