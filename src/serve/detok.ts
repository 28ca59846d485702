// Incremental detokenization with stop strings, for one generated sequence.
//
// Decoding each token on its own is wrong for byte-level BPE (a character can span tokens) and
// decoding the whole sequence per token is quadratic, so text is decoded over a short window:
// the tokens since the last emitted boundary, re-decoded with the new token, and the new suffix is
// accepted once it no longer ends in an incomplete character (U+FFFD). Stop strings are searched
// only in the text that could contain a new match, and a streaming consumer is held back by
// (longest stop string - 1) characters so it never sees text a stop string later removes.
import type { Tokenizer } from "../model/tokenizer.ts";

export interface TextOptions {
  skipSpecialTokens: boolean;
  stopStrings: string[];
  includeStopStr: boolean;
}

export class TextTracker {
  /** The decoded text so far (cut at a stop string once one matched). */
  text = "";
  /** The stop string that ended the text, if any. */
  stopped: string | null = null;
  /** Character offset in `text` where each pushed token's text starts (OpenAI `text_offset`). */
  readonly offsets: number[] = [];
  #ids: number[] = [];
  #prefixOffset = 0;
  #readOffset = 0;
  #emitted = 0;
  readonly #holdBack: number;

  constructor(
    readonly tokenizer: Tokenizer,
    readonly options: TextOptions,
  ) {
    this.#holdBack = Math.max(0, ...options.stopStrings.map((s) => s.length - 1));
  }

  /** Adds a token's text (`visible` false: the token counts but adds no text, e.g. a stop token). */
  push(token: number, visible = true): void {
    this.offsets.push(this.text.length);
    if (this.stopped !== null || !visible) return;
    if (this.options.skipSpecialTokens && this.tokenizer.specialIds.has(token)) return;
    this.#ids.push(token);
    const prefix = this.tokenizer.decode(this.#ids.slice(this.#prefixOffset, this.#readOffset));
    const full = this.tokenizer.decode(this.#ids.slice(this.#prefixOffset));
    if (full.length > prefix.length && !full.endsWith("\uFFFD")) {
      this.#append(full.slice(prefix.length));
      this.#prefixOffset = this.#readOffset;
      this.#readOffset = this.#ids.length;
    }
  }

  /** Decodes whatever is pending at the end of the sequence (an incomplete character included). */
  finish(): void {
    if (this.stopped !== null || this.#readOffset === this.#ids.length) return;
    const prefix = this.tokenizer.decode(this.#ids.slice(this.#prefixOffset, this.#readOffset));
    const full = this.tokenizer.decode(this.#ids.slice(this.#prefixOffset));
    this.#readOffset = this.#ids.length;
    if (full.length > prefix.length) this.#append(full.slice(prefix.length));
  }

  /** Text not yet handed out; while running, the last (longest stop - 1) characters stay back. */
  takeDelta(final: boolean): string {
    const upTo =
      final || this.stopped !== null ? this.text.length : Math.max(this.#emitted, this.text.length - this.#holdBack);
    const delta = this.text.slice(this.#emitted, upTo);
    this.#emitted = upTo;
    return delta;
  }

  #append(piece: string): void {
    const searchFrom = Math.max(0, this.text.length - this.#holdBack);
    this.text += piece;
    let best: { at: number; stop: string } | null = null;
    for (const stop of this.options.stopStrings) {
      const at = this.text.indexOf(stop, searchFrom);
      if (at >= 0 && (best === null || at < best.at)) best = { at, stop };
    }
    if (best) {
      this.stopped = best.stop;
      this.text = this.text.slice(0, best.at + (this.options.includeStopStr ? best.stop.length : 0));
    }
  }
}
