// A conversation -> token ids with a cross-entropy weight per token: 1 on exactly the tokens the
// model would have to sample to produce each target assistant turn, 0 elsewhere. "Exactly" means
// what the rollout driver (src/rollout/driver.ts) makes the model generate: everything after
// the template's generation prompt up to and including the stop token. So the header
// "<|im_start|>assistant\n" is context (the template writes it), the tool-call markup and the
// closing "<|im_end|>" are targets (the model writes them), and the template's "\n" after the stop
// token is context again.
//
// How the range is found without knowing the template: render messages[0..i-1] with the generation
// prompt (the target starts where it ends) and messages[0..i] without it (the turn as generated;
// the target ends after the first stop token past the message's content, so a stop token spelled
// inside the content is text, not a stop). The whole conversation's rendering must start with
// that much of the turn as generated (the extension property the rollout driver also needs);
// templates that rewrite earlier turns fail here with the row named. Tokens come from the same
// attributed rendering rollouts use (the whole text encoded once), weighted by each token's
// character offset, so SFT and RL see the same ids for the same conversation.
import { EnvError } from "../errors.ts";
import type { ChatRenderer, RenderOptions } from "../model/render.ts";
import type { SftConversation } from "./data.ts";

export interface SftTokens {
  tokenIds: number[];
  /** 1 on target tokens, 0 on context. */
  ceWeights: number[];
}

/**
 * The [start, end) character range of the assistant turn at `index` that the model generates, or
 * undefined when the conversation's rendering `text` rewrites that turn once later turns follow.
 */
function targetRange(
  renderer: ChatRenderer,
  conv: SftConversation,
  index: number,
  text: string,
  stops: string[],
  templateArgs: Record<string, unknown>,
): [number, number] | undefined {
  const options: RenderOptions = { tools: conv.tools, addGenerationPrompt: true, templateArgs };
  const prompt = renderer.text(conv.messages.slice(0, index), options);
  // The conversation right after this turn was generated: the turn is its last message.
  const asGenerated = renderer.text(conv.messages.slice(0, index + 1), { ...options, addGenerationPrompt: false });
  const content = conv.messages[index]!.content;
  const contentAt = content ? asGenerated.indexOf(content, prompt.length) : -1;
  const from = contentAt >= 0 ? contentAt + content.length : prompt.length;
  const stopEnds = stops.map((stop) => asGenerated.indexOf(stop, from) + stop.length).filter((e) => e > from);
  const end = stopEnds.length > 0 ? Math.min(...stopEnds) : asGenerated.length; // no stop token: the whole turn
  if (asGenerated.startsWith(prompt) && !text.startsWith(asGenerated.slice(0, end))) return undefined;
  if (!asGenerated.startsWith(prompt)) {
    throw new EnvError(
      `${conv.where}: the chat template's generation prompt is not how it renders assistant message ${index}, so what the model generated in that turn cannot be located`,
      {
        fix: "put each assistant turn in its own row (prompt = the turns before it, completion = the turn)",
      },
    );
  }
  return [prompt.length, end];
}

/** Renders a conversation and weights its target tokens, or names the first target turn it rewrites. */
function tokenizeWhole(
  renderer: ChatRenderer,
  conv: SftConversation,
  templateArgs: Record<string, unknown>,
): SftTokens | { rewritten: number } {
  const attributed = renderer.attribute(conv.messages, { tools: conv.tools, addGenerationPrompt: false, templateArgs });
  const stops = renderer.tokenizer.stopIds
    .map((id) => renderer.tokenizer.tokenString(id) ?? "")
    .filter((s) => s.length > 0);
  const ranges: Array<[number, number]> = [];
  for (let i = conv.targetsFrom; i < conv.messages.length; i++) {
    if (conv.messages[i]!.role !== "assistant") continue;
    const range = targetRange(renderer, conv, i, attributed.text, stops, templateArgs);
    if (!range) return { rewritten: i };
    ranges.push(range);
  }
  const tokens = renderer.tokenize(attributed);
  // A token is a target when it starts inside a target range (a crossing token at an edge belongs
  // where it starts, as everywhere in rendering: src/model/tokenize_spans.ts).
  const ceWeights = tokens.offsets.map((at) => (ranges.some(([a, b]) => at >= a && at < b) ? 1 : 0));
  return { tokenIds: tokens.tokenIds, ceWeights };
}

/** Renders a conversation and weights its target tokens; a template that rewrites a target turn is an error. */
export function tokenizeConversation(
  renderer: ChatRenderer,
  conv: SftConversation,
  templateArgs: Record<string, unknown> = {},
): SftTokens {
  const out = tokenizeWhole(renderer, conv, templateArgs);
  if ("rewritten" in out)
    throw new EnvError(
      `${conv.where}: the chat template renders the turns up to assistant message ${out.rewritten} differently once later turns follow (it rewrites earlier turns), so what the model generated in that turn cannot be located`,
      { fix: "put each assistant turn in its own row (prompt = the turns before it, completion = the turn)" },
    );
  return out;
}

/**
 * A conversation as training samples, split where the template rewrites history, as the rollout
 * driver splits a rollout (Qwen3 renders the last assistant turn with an empty think block and
 * drops it once later turns follow). Each sample is a whole rendering of the conversation up to
 * some assistant turn, targeting the turns since the previous sample; most rows are one sample.
 */
export function tokenizeConversationSamples(
  renderer: ChatRenderer,
  conv: SftConversation,
  templateArgs: Record<string, unknown> = {},
): SftTokens[] {
  const samples: SftTokens[] = [];
  const hasTarget = (from: number) => conv.messages.slice(from).some((m) => m.role === "assistant");
  let from = conv.targetsFrom;
  let end = conv.messages.length;
  while (samples.length === 0 || hasTarget(from)) {
    const part = { ...conv, messages: conv.messages.slice(0, end), targetsFrom: from };
    const out = tokenizeWhole(renderer, part, templateArgs);
    // Cut after the rewritten turn: as the last message it renders as generated (so end shrinks).
    if ("rewritten" in out) {
      end = out.rewritten + 1;
      continue;
    }
    samples.push(out);
    [from, end] = [end, conv.messages.length];
  }
  return samples;
}
