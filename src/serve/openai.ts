// The JSON shapes rlx serve answers with: OpenAI's completion, chat completion and their streamed
// chunks, vLLM's extensions (prompt_logprobs, stop_reason, token_ids), and vLLM's error body.
// Kept apart from the handlers so the wire format is in one place and can be compared with
// vLLM's field by field. rlx's one addition is `policy_version` at the top level of every
// response and chunk: the weights version that produced it.
import { EngineClosedError, InvalidRequestError, ModelNotFoundError, QueueFullError } from "../engine/errors.ts";
import { RlxError } from "../errors.ts";
import type { TopLogprobs } from "../native/generate.ts";

export const ERROR_TYPES: Record<number, string> = {
  400: "BadRequestError",
  401: "AuthenticationError",
  403: "PermissionDeniedError",
  404: "NotFoundError",
  405: "MethodNotAllowedError",
  413: "RequestTooLargeError",
  429: "RateLimitError",
  500: "InternalServerError",
  503: "ServiceUnavailableError",
};

export function errorBody(status: number, message: string, param: string | null = null) {
  return { object: "error", message, type: ERROR_TYPES[status] ?? "Error", param, code: status };
}

export function errorResponse(status: number, message: string, param: string | null = null): Response {
  return Response.json(errorBody(status, message, param), { status });
}

/** Maps an error from parsing or the engine to its HTTP answer; anything unexpected is a 500. */
export function responseForError(err: unknown): Response {
  if (err instanceof ModelNotFoundError) return errorResponse(404, err.message, err.param);
  if (err instanceof InvalidRequestError) return errorResponse(400, withFix(err), err.param);
  if (err instanceof QueueFullError) return errorResponse(429, withFix(err));
  if (err instanceof EngineClosedError) return errorResponse(503, withFix(err));
  if (err instanceof RlxError) return errorResponse(500, withFix(err));
  return errorResponse(500, `internal error: ${(err as Error)?.message ?? String(err)}`);
}

function withFix(err: RlxError): string {
  return err.fix ? `${err.message} (fix: ${err.fix})` : err.message;
}

export type FinishReasonOut = "stop" | "length" | "abort";

/** One finished choice, as the handlers assemble it. */
export interface ChoiceOut {
  index: number;
  text: string;
  tokens: number[];
  logprobs: number[];
  /** Per token, the alternatives asked for (empty when none were). */
  tops: TopLogprobs[];
  /** The text each token contributes (or "token_id:N"), for logprobs. */
  tokenStrings: string[];
  textOffsets: number[];
  finishReason: FinishReasonOut;
  stopReason: string | number | null;
  version: number;
}

export interface PromptLogprob {
  [tokenId: string]: { logprob: number; rank: number | null; decoded_token: string };
}

/** How a token id is spelled in logprobs: its text, or "token_id:N" (return_tokens_as_token_ids). */
export type Spell = (token: number) => string;

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function usage(promptTokens: number, completionTokens: number): Usage {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
}

/** One position of completions-style top_logprobs: the N alternatives, then the token itself (vLLM's). */
function topDict(spelled: string, logprob: number, top: TopLogprobs | undefined, spell: Spell) {
  const out: Record<string, number> = {};
  top?.ids.forEach((id, j) => (out[spell(id)] = top.logprobs[j]!));
  if (!(spelled in out)) out[spelled] = logprob;
  return out;
}

/**
 * Completions-style logprobs (OpenAI legacy): parallel lists. With echo the prompt's positions
 * come first (the first token's logprob and alternatives are null).
 */
export function completionLogprobs(
  strings: string[],
  logprobs: (number | null)[],
  offsets: number[],
  tops: (TopLogprobs | null)[],
  spell: Spell,
) {
  return {
    text_offset: offsets,
    token_logprobs: logprobs,
    tokens: strings,
    top_logprobs: strings.map((s, i) =>
      logprobs[i] === null ? null : topDict(s, logprobs[i]!, tops[i] ?? undefined, spell),
    ),
  };
}

const bytesOf = (text: string) => Array.from(new TextEncoder().encode(text));

/** Chat-style logprobs: one entry per token, its top_logprobs the N alternatives, most likely first. */
export function chatLogprobs(strings: string[], logprobs: number[], tops: TopLogprobs[], spell: Spell) {
  return {
    content: strings.map((token, i) => ({
      token,
      logprob: logprobs[i]!,
      bytes: bytesOf(token),
      top_logprobs: (tops[i]?.ids ?? []).map((id, j) => {
        const text = spell(id);
        return { token: text, logprob: tops[i]!.logprobs[j]!, bytes: bytesOf(text) };
      }),
    })),
  };
}

let counter = 0;
export function requestId(prefix: string): string {
  counter = (counter + 1) % 1e9;
  return `${prefix}-${Date.now().toString(36)}${counter.toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}

export const nowSeconds = () => Math.floor(Date.now() / 1000);
