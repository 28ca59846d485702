// The request bodies of /v1/completions and /v1/chat/completions, read into one normalized form.
// Field names, defaults and ranges follow vLLM's OpenAI-compatible server, so existing clients
// work unchanged; the extensions rlx needs for RL (token-id prompts, stop_token_ids,
// prompt_logprobs, return_tokens_as_token_ids) are vLLM's own. Top-N alternatives (logprobs = N,
// top_logprobs = N, prompt_logprobs = N) are capped by the server's max_logprobs, as in vLLM.
// Fields that would change the result but are not implemented (penalties, logit_bias, beam
// search, ...) are 400s naming the field, never silently ignored.
import { type ChatInputs, readChatInputs } from "./chat_request.ts";
import { InvalidRequestError } from "../engine/errors.ts";
import { checkTokenIds, Fields } from "./fields.ts";

/** What every generation request resolves to. */
export interface SamplingSpec {
  model: string | undefined;
  n: number;
  /** undefined: up to the context limit (chat's default). */
  maxTokens: number | undefined;
  temperature: number;
  topP: number;
  /** 0 = off. */
  topK: number;
  seed: number | undefined;
  /** OpenAI's end-user id; rlx train sends the rollout id, which the schedule record keeps. */
  user: string | undefined;
  stopStrings: string[];
  stopTokenIds: number[];
  ignoreEos: boolean;
  includeStopStr: boolean;
  skipSpecialTokens: boolean;
  /** Sampled-token logprobs requested. */
  logprobs: boolean;
  /** Alternatives per generated token (completions' logprobs = N, chat's top_logprobs = N). */
  topLogprobs: number;
  /** prompt_logprobs = N: null when not asked; N alternatives per prompt position. */
  promptLogprobs: number | null;
  tokensAsIds: boolean;
  returnTokenIds: boolean;
  stream: boolean;
  includeUsage: boolean;
}

export interface CompletionParams extends SamplingSpec {
  /** Token ids, or text to encode. */
  prompts: (number[] | string)[];
  /** The prompt comes back before the completion: its text, and with logprobs its tokens' logprobs. */
  echo: boolean;
}

export interface ChatParams extends SamplingSpec, ChatInputs {}

const isZero = (v: unknown) => v === 0;
const isFalse = (v: unknown) => v === false;
const isEmpty = (v: unknown) =>
  (Array.isArray(v) && v.length === 0) || (typeof v === "object" && v !== null && Object.keys(v).length === 0);

function samplingSpec(f: Fields, vocab: number, chat: boolean, maxLogprobs: number): SamplingSpec {
  f.unsupported("presence_penalty", isZero);
  f.unsupported("frequency_penalty", isZero);
  f.unsupported("repetition_penalty", (v) => v === 1);
  f.unsupported("min_p", isZero);
  f.unsupported("min_tokens", isZero);
  f.unsupported("logit_bias", isEmpty);
  f.unsupported("use_beam_search", isFalse);
  f.unsupported("length_penalty", (v) => v === 1);
  f.unsupported("bad_words", isEmpty);
  f.unsupported("allowed_token_ids", isEmpty);
  for (const guided of ["guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs"])
    f.unsupported(guided, () => false, "(guided decoding) is not supported by rlx serve");
  f.unsupported(
    "response_format",
    (v) => typeof v === "object" && v !== null && (v as { type?: unknown }).type === "text",
    'other than {"type": "text"} is not supported by rlx serve',
  );
  const model = f.string("model");
  const n = f.int("n", 1, { min: 1, max: 128 });
  f.unsupported("best_of", (v) => v === n, "different from n is not supported by rlx serve (no beam search)");
  const maxTokens = f.int(
    chat && f.has("max_completion_tokens") ? "max_completion_tokens" : "max_tokens",
    chat ? undefined : 16,
    { min: 1 },
  );
  const temperature = f.number("temperature", 1, { min: 0 });
  const topP = f.number("top_p", 1, { min: 0, max: 1, minExclusive: true });
  const topK = f.int("top_k", 0, { min: -1 });
  if (topK > vocab) throw new InvalidRequestError(`top_k must be -1, 0 (off) or 1..${vocab}, got ${topK}`, "top_k");
  const seed = f.int("seed", undefined, { min: -(2 ** 53) + 1, max: 2 ** 53 - 1 });
  const streamOptions = f.object("stream_options");
  const stream = f.bool("stream", false);
  if (streamOptions !== undefined && !stream)
    throw new InvalidRequestError("stream_options can only be set when stream is true", "stream_options");
  const includeUsage = streamOptions?.include_usage === true;
  return {
    model,
    n,
    maxTokens,
    temperature,
    topP,
    topK: topK > 0 ? topK : 0,
    seed: seed === undefined ? undefined : seed < 0 ? seed + 2 ** 53 : seed,
    user: f.string("user"),
    stopStrings: f.strings("stop"),
    stopTokenIds: f.tokenIds("stop_token_ids", vocab),
    ignoreEos: f.bool("ignore_eos", false),
    includeStopStr: f.bool("include_stop_str_in_output", false),
    skipSpecialTokens: f.bool("skip_special_tokens", true),
    logprobs: false,
    topLogprobs: 0,
    promptLogprobs: topCount(f, "prompt_logprobs", maxLogprobs) ?? null,
    tokensAsIds: f.bool("return_tokens_as_token_ids", false),
    returnTokenIds: f.bool("return_token_ids", false),
    stream,
    includeUsage,
  };
}

/** A count of alternatives per token, 0..max_logprobs (vLLM's limit, a 400 naming the field past it). */
function topCount(f: Fields, name: string, maxLogprobs: number): number | undefined {
  const k = f.int(name, undefined, { min: 0 });
  if (k !== undefined && k > maxLogprobs)
    throw new InvalidRequestError(
      `${name} = ${k} asks for more alternatives than this server's max_logprobs (${maxLogprobs})`,
      name,
      { fix: `ask for at most ${maxLogprobs}, or start the server with --max-logprobs ${k}` },
    );
  return k;
}

/** POST /v1/completions. */
export function completionParams(f: Fields, vocab: number, maxLogprobs = 20): CompletionParams {
  f.unsupported("suffix", (v) => v === "", "is not supported by rlx serve");
  const spec = samplingSpec(f, vocab, false, maxLogprobs);
  const k = topCount(f, "logprobs", maxLogprobs);
  spec.logprobs = k !== undefined;
  spec.topLogprobs = k ?? 0;
  const echo = f.bool("echo", false);
  if (echo && spec.stream)
    throw new InvalidRequestError("echo is not supported with stream: true in rlx serve", "echo");
  return { ...spec, echo, prompts: readPrompts(f.raw("prompt"), vocab) };
}

function readPrompts(prompt: unknown, vocab: number): (number[] | string)[] {
  if (prompt === undefined) throw new InvalidRequestError("prompt is required", "prompt");
  if (typeof prompt === "string") return [prompt];
  if (!Array.isArray(prompt) || prompt.length === 0)
    throw new InvalidRequestError(
      "prompt must be a string, a list of strings, a list of token ids, or a list of lists of token ids (non-empty)",
      "prompt",
    );
  if (prompt.every((p) => typeof p === "number")) return [checkTokenIds(prompt, "prompt", vocab)];
  if (prompt.every((p) => typeof p === "string")) return prompt as string[];
  if (prompt.every((p) => Array.isArray(p))) return prompt.map((p, i) => checkTokenIds(p, `prompt[${i}]`, vocab));
  throw new InvalidRequestError(
    "prompt mixes types: use one string, a list of strings, a list of token ids, or a list of lists of token ids",
    "prompt",
  );
}

/** POST /v1/chat/completions. */
export function chatParams(f: Fields, vocab: number, maxLogprobs = 20): ChatParams {
  f.unsupported("echo", isFalse);
  f.unsupported("continue_final_message", isFalse);
  const spec = samplingSpec(f, vocab, true, maxLogprobs);
  spec.logprobs = f.bool("logprobs", false);
  const top = topCount(f, "top_logprobs", maxLogprobs);
  spec.topLogprobs = top ?? 0;
  if (top !== undefined && !spec.logprobs)
    throw new InvalidRequestError("top_logprobs needs logprobs: true", "top_logprobs");
  return { ...spec, ...readChatInputs(f) };
}
