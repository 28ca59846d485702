// The prompt side of a completion request: vLLM's prompt_logprobs (the prompt token's logprob and
// rank, and the N most likely tokens at each position) and what `echo` puts before the completion
// (the prompt's text, tokens, logprobs, alternatives and text offsets). Every prompt of a request
// is scored in one native call (rlx_score_top) at temperature 1, as vLLM reports prompt logprobs.
import type { TopLogprobs } from "../native/generate.ts";
import type { ServeContext } from "./choice.ts";
import { TextTracker } from "./detok.ts";
import type { PromptLogprob, Spell } from "./openai.ts";

/** One prompt's echo: what goes before the completion's text and logprobs. */
export interface EchoedPrompt {
  text: string;
  tokenStrings: string[];
  /** null for the first token (nothing predicts it). */
  logprobs: (number | null)[];
  tops: (TopLogprobs | null)[];
  offsets: number[];
}

/** Scores every prompt once with the most alternatives any consumer asks for. */
export function scorePrompts(ctx: ServeContext, prompts: number[][], k: number) {
  return ctx.engine.scoreTop(prompts, k);
}

/** vLLM's prompt_logprobs row: null, then {token_id: {logprob, rank, decoded_token}} per position. */
export function promptLogprobRow(
  tokens: number[],
  scored: { logprobs: Float32Array; top: (TopLogprobs | null)[] },
  n: number,
  decode: (token: number) => string,
): (PromptLogprob | null)[] {
  return tokens.map((token, i) => {
    const top = scored.top[i];
    if (i === 0 || !top) return null;
    const row: PromptLogprob = {
      [String(token)]: { logprob: scored.logprobs[i]!, rank: top.rank, decoded_token: decode(token) },
    };
    for (let j = 0; j < n; j++) {
      const id = top.ids[j]!;
      if (!(String(id) in row)) row[String(id)] = { logprob: top.logprobs[j]!, rank: j + 1, decoded_token: decode(id) };
    }
    return row;
  });
}

/** The prompt as echo returns it: a text prompt as sent, token ids decoded; alternatives cut to n. */
export function echoPrompt(
  ctx: ServeContext,
  prompt: number[] | string,
  tokens: number[],
  scored: { logprobs: Float32Array; top: (TopLogprobs | null)[] } | null,
  n: number,
  spell: Spell,
): EchoedPrompt {
  const tracker = new TextTracker(ctx.tokenizer, { skipSpecialTokens: false, stopStrings: [], includeStopStr: false });
  for (const t of tokens) tracker.push(t);
  tracker.finish();
  const cut = (top: TopLogprobs | null) =>
    top && { ids: top.ids.slice(0, n), logprobs: top.logprobs.slice(0, n), rank: top.rank };
  return {
    text: typeof prompt === "string" ? prompt : tracker.text,
    tokenStrings: tokens.map(spell),
    logprobs: tokens.map((_, i) => (i === 0 || !scored ? null : scored.logprobs[i]!)),
    tops: tokens.map((_, i) => (i === 0 || !scored ? null : cut(scored.top[i] ?? null))),
    offsets: tracker.offsets,
  };
}
