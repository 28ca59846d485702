// A conversation -> token ids with a cross-entropy weight per token: 1 on exactly the tokens the
// model would have to sample to produce each target assistant turn, 0 elsewhere. "Exactly" means
// what the rollout driver (src/orchestrator/rollout.ts) makes the model generate: everything after
// the template's generation prompt up to and including the stop token. So the header
// "<|im_start|>assistant\n" is context (the template writes it), the tool-call markup and the
// closing "<|im_end|>" are targets (the model writes them), and the template's "\n" after the stop
// token is context again.
//
// How the range is found without knowing the template: render messages[0..i-1] with the generation
// prompt; that text must be a prefix of the whole rendering (the extension property the rollout
// driver also needs), and the target starts where it ends. The target ends after the first stop
// token in the template's scaffold of message i (a stop token's spelling inside the message's
// content is text, not a stop). Tokens come from the same attributed rendering rollouts use, split
// at those two character positions, so SFT and RL see the same ids for the same conversation.
import { EnvError } from "../errors.ts";
import type { ChatRenderer, RenderOptions, Span } from "../model/render.ts";
import type { SftConversation } from "./sft_data.ts";

export interface SftTokens {
  tokenIds: number[];
  /** 1 on target tokens, 0 on context. */
  ceWeights: number[];
}

/** The [start, end) character range of the assistant turn at `index` that the model generates. */
function targetRange(renderer: ChatRenderer, conv: SftConversation, index: number, text: string, spans: Span[], stops: string[]): [number, number] {
  const options: RenderOptions = { tools: conv.tools, addGenerationPrompt: true };
  const prompt = renderer.text(conv.messages.slice(0, index), options);
  if (!text.startsWith(prompt)) {
    throw new EnvError(`${conv.where}: the chat template does not extend its rendering of the turns before assistant message ${index} (it rewrites earlier turns), so that turn's target tokens cannot be located`, {
      fix: "put each assistant turn in its own row (prompt = the turns before it, completion = the turn)",
    });
  }
  const own = spans.filter((s) => s.messageIndex === index);
  const end = own.at(-1)?.end ?? prompt.length;
  for (const span of own) {
    if (span.isContent || span.end <= prompt.length) continue;
    const from = Math.max(span.start, prompt.length);
    let stopEnd = Number.POSITIVE_INFINITY;
    for (const stop of stops) {
      const at = text.indexOf(stop, from);
      if (at !== -1 && at + stop.length <= span.end) stopEnd = Math.min(stopEnd, at + stop.length);
    }
    if (Number.isFinite(stopEnd)) return [prompt.length, stopEnd];
  }
  return [prompt.length, end]; // a template that writes no stop token: the whole turn
}

/** Cuts spans at `cuts` so that every piece lies wholly inside or outside each target range. */
function splitSpans(spans: Span[], cuts: number[]): Span[] {
  const out: Span[] = [];
  for (const span of spans) {
    let start = span.start;
    for (const cut of cuts) {
      if (cut > start && cut < span.end) {
        out.push({ ...span, start, end: cut });
        start = cut;
      }
    }
    out.push({ ...span, start });
  }
  return out;
}

/** Renders a conversation and weights its target tokens. */
export function tokenizeConversation(renderer: ChatRenderer, conv: SftConversation): SftTokens {
  const attributed = renderer.attribute(conv.messages, { tools: conv.tools, addGenerationPrompt: false });
  const stops = renderer.tokenizer.stopIds.map((id) => renderer.tokenizer.tokenString(id) ?? "").filter((s) => s.length > 0);
  const ranges: Array<[number, number]> = [];
  conv.messages.forEach((m, i) => {
    if (i >= conv.targetsFrom && m.role === "assistant") ranges.push(targetRange(renderer, conv, i, attributed.text, attributed.spans, stops));
  });
  const pieces = splitSpans(attributed.spans, ranges.flat().sort((a, b) => a - b));
  const out: SftTokens = { tokenIds: [], ceWeights: [] };
  for (const piece of pieces) {
    if (piece.end <= piece.start) continue;
    const ids = renderer.tokenize({ text: attributed.text, spans: [piece] }).tokenIds;
    const target = ranges.some(([a, b]) => piece.start >= a && piece.end <= b) ? 1 : 0;
    for (const id of ids) {
      out.tokenIds.push(id);
      out.ceWeights.push(target);
    }
  }
  return out;
}
