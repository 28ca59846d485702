// Attributed text -> token ids, the way transformers and vLLM encode a rendered chat: the whole
// text at once (split only at added tokens, then one BPE pass per section), so a merge that
// crosses a span edge (Qwen's ".\n" after a tool output, "\n\n" before a content that starts with
// a newline) is the same token it would be in `tokenizer(text)`. Each token is then attributed by
// character offset: it belongs to the span holding its first byte. A token that runs past its
// span's end is a crossing, reported in `crossings` (its index), never split: splitting it would
// change the ids the model sees.
//
// Only the template's own scaffold is split at added-token spellings; content (task, tool and
// model text) never becomes a special token, even if it spells one (`Tokenizer.encodePlain`).
// Tokenizers whose token lengths cannot be known (not byte-level, or a normalizer that changes
// the text) fall back to encoding each span apart.
import type { Tokenizer } from "./tokenizer.ts";

/** A character range of rendered text owned by one message. */
export interface Span {
  start: number;
  end: number;
  messageIndex: number;
  isContent: boolean;
}

export interface AttributedText {
  text: string;
  spans: Span[];
}

/** Token ids with per-token attribution (parallel arrays). */
export interface AttributedTokens {
  tokenIds: number[];
  messageIndex: number[];
  isContent: boolean[];
  /** Character offset in the text where each token starts. */
  offsets: number[];
  /** Indices of tokens that run past the end of the span they start in. */
  crossings: number[];
}

/** A run of text encoded in one pass: an added token of the scaffold, or plain text between them. */
interface Section {
  start: number;
  end: number;
  addedId?: number;
}

/** Cuts text[from..] at added-token spellings inside scaffold spans (longest spelling first). */
function sections(tokenizer: Tokenizer, attributed: AttributedText, from: number): Section[] {
  const byFirst = new Map<string, Array<[string, number]>>();
  for (const [spelling, id] of tokenizer.addedTokens) {
    const list = byFirst.get(spelling[0]!) ?? [];
    list.push([spelling, id]);
    byFirst.set(spelling[0]!, list);
  }
  for (const list of byFirst.values()) list.sort((a, b) => b[0].length - a[0].length);
  const { text } = attributed;
  const out: Section[] = [];
  let plainStart = from;
  for (const span of attributed.spans) {
    if (span.isContent || span.end <= from) continue;
    for (let i = Math.max(span.start, from); i < span.end; i++) {
      const match = byFirst.get(text[i]!)?.find(([spelling]) => text.startsWith(spelling, i));
      if (!match) continue;
      if (i > plainStart) out.push({ start: plainStart, end: i });
      out.push({ start: i, end: i + match[0].length, addedId: match[1] });
      i += match[0].length - 1;
      plainStart = i + 1;
    }
  }
  if (plainStart < text.length) out.push({ start: plainStart, end: text.length });
  return out;
}

/** Character offset of each token of a plain section, from UTF-8 byte lengths. */
function tokenOffsets(piece: string, byteLengths: number[]): number[] {
  const charAtByte: number[] = [];
  let char = 0;
  for (const codePoint of piece) {
    const bytes = Buffer.byteLength(codePoint, "utf8");
    for (let b = 0; b < bytes; b++) charAtByte.push(char);
    char += codePoint.length;
  }
  const offsets: number[] = [];
  let byte = 0;
  for (const n of byteLengths) {
    offsets.push(charAtByte[byte]!);
    byte += n;
  }
  return offsets;
}

/** Encodes attributed text from character `from` on (spans cut at `from`). */
export function tokenizeSpans(tokenizer: Tokenizer, attributed: AttributedText, from = 0): AttributedTokens {
  const { text, spans } = attributed;
  const ids: number[] = [];
  const offsets: number[] = [];
  const push = (id: number, offset: number) => {
    ids.push(id);
    offsets.push(offset);
  };
  for (const section of sections(tokenizer, attributed, from)) {
    if (section.addedId !== undefined) {
      push(section.addedId, section.start);
      continue;
    }
    const piece = text.slice(section.start, section.end);
    const encoded = tokenizer.encodePlainWithLengths(piece);
    if (encoded) {
      const at = tokenOffsets(piece, encoded.byteLengths);
      encoded.ids.forEach((id, k) => push(id, section.start + at[k]!));
      continue;
    }
    // Lengths unknown: each span's part of the section on its own.
    for (const span of spans) {
      const a = Math.max(span.start, section.start);
      const b = Math.min(span.end, section.end);
      if (a < b) for (const id of tokenizer.encodePlain(text.slice(a, b))) push(id, a);
    }
  }
  const out: AttributedTokens = { tokenIds: ids, messageIndex: [], isContent: [], offsets, crossings: [] };
  let s = 0;
  ids.forEach((id, k) => {
    while (s < spans.length - 1 && spans[s]!.end <= offsets[k]!) s++;
    const span = spans[s]!;
    out.messageIndex.push(span.messageIndex);
    out.isContent.push(span.isContent && !tokenizer.specialIds.has(id));
    const next = k + 1 < ids.length ? offsets[k + 1]! : text.length;
    if (next > span.end) out.crossings.push(k);
  });
  return out;
}
