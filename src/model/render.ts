// Chat rendering with attribution: messages -> the model's own chat template (@huggingface/jinja)
// -> token ids where every token knows its message, and whether it is message content or template
// scaffold. Rollouts, ECHO's observation weights and the demonstration files all build on it.
//
// How attribution works, without knowing anything about a particular template:
//   - Message boundaries: render each prefix messages[0..i] and take its longest common prefix
//     with the full rendering; the text between consecutive boundaries belongs to message i. (A
//     template may render a prefix differently from the whole, e.g. two tool results in a row
//     share one turn, so we take the common part rather than demand a string prefix.) The text a
//     generation prompt adds belongs to the next message (index messages.length).
//   - Content: render the message once more with its content replaced by a sentinel; where the
//     sentinel lands is where the content starts. If the template transformed the content (strip),
//     fall back to searching for it inside the message's text.
//   - Tokens: the whole text is encoded once, as transformers and vLLM encode it, and each token
//     is attributed by its character offset (tokenize_spans.ts, which also says what happens to a
//     token that crosses a span edge).
import { Template } from "@huggingface/jinja";
import "./jinja_strings.ts"; // Python strip(chars) semantics (the library ignores the argument)
import { ModelFileError } from "../errors.ts";
import type { ChatMessage, ToolSpec } from "../data/chat.ts";
import type { Tokenizer } from "./tokenizer.ts";
import { type AttributedText, type AttributedTokens, type Span, tokenizeSpans } from "./tokenize_spans.ts";

export type { AttributedText, AttributedTokens, Span } from "./tokenize_spans.ts";

export interface RenderOptions {
  tools?: ToolSpec[];
  addGenerationPrompt: boolean;
  /** Extra template variables (e.g. `enable_thinking`). */
  templateArgs?: Record<string, unknown>;
}

const CONTENT_SENTINEL = "\u2063rlx\u2063content\u2063";
const REASONING_SENTINEL = "\u2063rlx\u2063reasoning\u2063";

function commonPrefixLength(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

/** A message's own printed values (content, reasoning, tool names), trimmed, non-empty. */
function fieldValues(message: ChatMessage): string[] {
  const values = [
    message.content,
    message.reasoning_content ?? "",
    ...(message.tool_calls ?? []).map((c) => c.function.name),
  ];
  return values.map((v) => v.trim()).filter((v) => v !== "");
}

/** The index of the n-th (1-based) occurrence of `needle` in `text` from `from`, or -1. */
function nthIndexOf(text: string, needle: string, from: number, n: number): number {
  let at = from - 1;
  for (let k = 0; k < n; k++) {
    at = text.indexOf(needle, at + 1);
    if (at === -1) return -1;
  }
  return at;
}

/**
 * Where message i ends in the full rendering `text`, given `prefix`, the rendering of messages
 * 0..i alone. Usually their common prefix. But a template may render earlier turns differently
 * once later ones follow (Qwen3 drops the <think> block of assistant turns before the last user
 * message): then the prefix diverges before message i's last printed field (its content, a tool
 * call, its reasoning). The end is then realigned on that field: the closing text after it in
 * the prefix, as far as the full text agrees.
 */
function messageEnd(prefix: string, text: string, start: number, message: ChatMessage): number {
  const common = commonPrefixLength(prefix, text);
  const values = fieldValues(message);
  const rest = prefix.slice(common);
  if (common >= start && !values.some((v) => rest.includes(v))) return common;
  const byLastPrinted = values
    .map((v) => [v, prefix.lastIndexOf(v)] as const)
    .filter(([, at]) => at !== -1)
    .sort((x, y) => y[1] - x[1]);
  for (const [value, inPrefix] of byLastPrinted) {
    // The same occurrence in the full text: a tool name also occurs inside the content before it.
    const calls = (message.tool_calls ?? []).filter((c) => c.function.name.trim() === value).length;
    const n = calls > 0 ? calls + message.content.split(value).length - 1 : 1;
    const at = nthIndexOf(text, value, start, n);
    if (at === -1) continue; // not printed in the full rendering (dropped reasoning)
    return at + commonPrefixLength(prefix.slice(inPrefix), text.slice(at));
  }
  return Math.max(common, start);
}

export class ChatRenderer {
  private readonly template: Template;

  constructor(
    readonly tokenizer: Tokenizer,
    templateSource: string | undefined = tokenizer.chatTemplate,
  ) {
    if (!templateSource) {
      throw new ModelFileError("the model has no chat template", {
        fix: "add `chat_template` to tokenizer_config.json (or a chat_template.jinja file) in the model directory",
      });
    }
    this.template = new Template(templateSource);
  }

  /** The template's text for `messages`. */
  text(messages: ChatMessage[], options: RenderOptions): string {
    return this.template.render({
      ...this.tokenizer.templateTokens,
      ...options.templateArgs,
      messages,
      tools: options.tools && options.tools.length > 0 ? options.tools : undefined,
      add_generation_prompt: options.addGenerationPrompt,
    });
  }

  /** Renders and attributes every character to a message and to content or scaffold. */
  attribute(messages: ChatMessage[], options: RenderOptions): AttributedText {
    const text = this.text(messages, options);
    const closed = { ...options, addGenerationPrompt: false };
    const spans: Span[] = [];
    let start = 0;
    for (let i = 0; i < messages.length; i++) {
      let end: number;
      if (i < messages.length - 1) {
        const prefix = this.tryText(messages.slice(0, i + 1), closed);
        end = prefix === undefined ? start : messageEnd(prefix, text, start, messages[i]!);
      } else {
        end = options.addGenerationPrompt ? this.closedLength(messages, closed, text) : text.length;
      }
      end = this.snapOutOfAddedToken(text, Math.max(start, end), start);
      this.pushMessageSpans(spans, messages, i, text, start, end, closed);
      start = end;
    }
    if (start < text.length) spans.push({ start, end: text.length, messageIndex: messages.length, isContent: false });
    return { text, spans };
  }

  /** Encodes attributed text from character `from` on, whole (tokenize_spans.ts), attributed by offset. */
  tokenize(attributed: AttributedText, from = 0): AttributedTokens {
    return tokenizeSpans(this.tokenizer, attributed, from);
  }

  /** Renders, attributes and encodes a whole conversation. */
  render(messages: ChatMessage[], options: RenderOptions): AttributedTokens & { text: string } {
    const attributed = this.attribute(messages, options);
    return { ...this.tokenize(attributed), text: attributed.text };
  }

  /**
   * The tokens that extend a sequence after a sampled assistant turn (the extension property):
   * `prevText` is the template text the sequence had up to the generation prompt, the model then
   * produced `messages[assistantIndex]`, `generated` as text, ending in the stop token spelled
   * `stopText`. Returns the new template text and the tokens to append (template tail after the
   * stop token, the new messages, the generation prompt), or null when the template does not
   * extend its previous rendering, in which case the caller re-renders from scratch:
   *   - the new rendering does not start with `prevText` (an earlier turn or the generation prompt
   *     was rewritten: Qwen3's enable_thinking false prompt ends in an empty think block that the
   *     turn, once followed by others, is rendered without);
   *   - the turn itself renders differently once followed by others than as the last message,
   *     and not as it was generated either (Qwen3 drops the <think> block of a turn before the
   *     last user message). A turn the template merely formats differently from the sample
   *     (spacing in tool-call JSON) is kept as sampled: tokens are never re-tokenized.
   */
  bridge(
    prevText: string,
    messages: ChatMessage[],
    assistantIndex: number,
    stopText: string,
    options: RenderOptions,
    generated?: string,
  ): { text: string; tokens: AttributedTokens } | null {
    const asLast = this.tryText(messages.slice(0, assistantIndex + 1), { ...options, addGenerationPrompt: false });
    let attributed: AttributedText;
    try {
      attributed = this.attribute(messages, options);
    } catch {
      return null;
    }
    const { text, spans } = attributed;
    if (asLast === undefined || !asLast.startsWith(prevText) || !text.startsWith(prevText)) return null;
    const mine = spans.filter((s) => s.messageIndex === assistantIndex);
    if (mine.length === 0) return null;
    const stopAt = text.lastIndexOf(stopText, mine.at(-1)!.end - stopText.length);
    if (stopAt < prevText.length) return null;
    const turn = text.slice(prevText.length, stopAt + stopText.length);
    const lastStop = asLast.lastIndexOf(stopText);
    const turnAsLast =
      lastStop < prevText.length ? undefined : asLast.slice(prevText.length, lastStop + stopText.length);
    if (turn !== turnAsLast && turn !== generated) return null;
    return { text, tokens: this.tokenize(attributed, stopAt + stopText.length) };
  }

  private tryText(messages: ChatMessage[], options: RenderOptions): string | undefined {
    try {
      return this.text(messages, options);
    } catch {
      return undefined; // templates may refuse partial conversations (e.g. "no user message")
    }
  }

  /** Where the last message ends when a generation prompt follows it. */
  private closedLength(messages: ChatMessage[], closed: RenderOptions, full: string): number {
    const withoutPrompt = this.tryText(messages, closed);
    return withoutPrompt === undefined ? full.length : commonPrefixLength(withoutPrompt, full);
  }

  /** Moves a boundary back to the start of an added token it would cut in two. */
  private snapOutOfAddedToken(text: string, boundary: number, floor: number): number {
    for (const spelling of this.tokenizer.addedTokens.keys()) {
      const from = Math.max(floor, boundary - spelling.length + 1);
      const at = text.indexOf(spelling, from);
      if (at !== -1 && at < boundary && at + spelling.length > boundary) return at;
    }
    return boundary;
  }

  private pushMessageSpans(
    spans: Span[],
    messages: ChatMessage[],
    i: number,
    text: string,
    start: number,
    end: number,
    closed: RenderOptions,
  ): void {
    const message = messages[i]!;
    const ranges: Array<[number, number]> = [];
    for (const [field, sentinel] of [
      ["reasoning_content", REASONING_SENTINEL],
      ["content", CONTENT_SENTINEL],
    ] as const) {
      const value = message[field];
      if (!value) continue;
      const range = this.locate(messages, i, field, sentinel, value, text, end, ranges.at(-1)?.[1] ?? start, closed);
      if (range) ranges.push(range);
    }
    let cursor = start;
    for (const [a, b] of ranges) {
      if (a > cursor) spans.push({ start: cursor, end: a, messageIndex: i, isContent: false });
      spans.push({ start: a, end: b, messageIndex: i, isContent: true });
      cursor = b;
    }
    if (end > cursor) spans.push({ start: cursor, end, messageIndex: i, isContent: false });
  }

  /** The [start, end) of a message field's value inside its text, searched from `after`. */
  private locate(
    messages: ChatMessage[],
    i: number,
    field: "content" | "reasoning_content",
    sentinel: string,
    value: string,
    text: string,
    end: number,
    after: number,
    closed: RenderOptions,
  ): [number, number] | null {
    const probe = [...messages.slice(0, i), { ...messages[i]!, [field]: sentinel }];
    const rendered = this.tryText(probe, closed);
    const at = rendered?.indexOf(sentinel) ?? -1;
    // The value as printed: as is, or stripped the ways templates strip it (trim, strip('\n')).
    const candidates = [
      ...new Set([value, value.trim(), value.replace(/^\n+/, "").replace(/\n+$/, ""), value.replace(/^\n+/, "")]),
    ].filter((c) => c);
    // Where the sentinel landed first (a search could match a newline of the scaffold before it).
    for (const candidate of candidates)
      if (at >= after && at + candidate.length <= end && text.startsWith(candidate, at))
        return [at, at + candidate.length];
    for (const candidate of candidates) {
      const found = text.indexOf(candidate, after);
      if (found !== -1 && found + candidate.length <= end) return [found, found + candidate.length];
    }
    return null;
  }
}
