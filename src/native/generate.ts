// Typed wrappers for generation and scoring (native/src/generate.cpp).
//
// NativeGenerator is the incremental interface a server schedules (add sequences, step them all,
// cancel one): each finished sequence frees its slot in the call that reports it. generate() is
// the one-call form built on it: it keeps up to `slots` sequences running and admits the next
// prompt as soon as a slot frees, so it is already continuous batching.
//
// Logprobs are log_softmax(logits / temperature) of the chosen token over the full distribution,
// before top-k/top-p truncation: what the trainer computes for the same token at the same
// temperature. Greedy (temperature 0) reports the temperature-1 logprob.
import type { Pointer } from "bun:ffi";
import { NativeError } from "../errors.ts";
import { check, native } from "./ffi.ts";
import { cstr, type NativeModel } from "./model.ts";

export interface SamplingParams {
  /** 0 = greedy. Default 1. */
  temperature?: number;
  /** (0, 1]; default 1 (off). */
  topP?: number;
  /** 0 = off (default). */
  topK?: number;
  maxNewTokens: number;
  /** Integer below 2^53; default 0. */
  seed?: number;
  stopTokenIds?: readonly number[];
}

export type FinishReason = "stop" | "length";

/** One generated token of one sequence; finish is set on the sequence's last token. */
export interface GenToken {
  slot: number;
  token: number;
  logprob: number;
  finish: FinishReason | null;
}

/** The most likely tokens of one position's distribution, and the rank of the token there. */
export interface TopLogprobs {
  ids: number[];
  logprobs: number[];
  /** 1-based: tokens at least as likely as the chosen (or actual) one, itself included. */
  rank: number;
}

/** The K/V cache's budget and use, in tokens (whole blocks). */
export interface KVStats {
  blockTokens: number;
  budgetTokens: number;
  /** Held by running sequences. */
  runningTokens: number;
  /** Held only by finished sequences' kept prefixes, given up when needed. */
  keptTokens: number;
  /** What running sequences may still take, up to their prompt + max tokens. */
  reservedTokens: number;
}

export interface CacheStats {
  prompts: number;
  promptTokens: number;
  reusedTokens: number;
  kv: KVStats;
}

export interface Completion {
  tokens: number[];
  logprobs: number[];
  finish: FinishReason;
}

interface GenOutputs {
  slots: Int32Array;
  tokens: Int32Array;
  logprobs: Float32Array;
  finish: Int32Array;
}

const SAMPLING_FIELDS = 5;
const FINISH: (FinishReason | null)[] = [null, "stop", "length"];

function tokenArray(tokens: ArrayLike<number>): Int32Array {
  return tokens instanceof Int32Array ? tokens : Int32Array.from(tokens);
}

export class NativeGenerator {
  #handle: Pointer | null;
  readonly slots: number;
  readonly capacity: number;

  private constructor(handle: Pointer, slots: number, capacity: number) {
    this.#handle = handle;
    this.slots = slots;
    this.capacity = capacity;
  }

  /** Up to `slots` sequences of up to `capacity` tokens (prompt + generated) each, over a K/V
   * cache of kvTokens tokens (default: every slot's whole sequence; at least capacity) that each
   * sequence takes blocks of as it needs them (rlx.h rlx_gen_create). keepPrefixes (default true):
   * a later prompt may continue the K/V a slot kept from an earlier sequence (rlx.h
   * rlx_gen_cache_stats); false makes every prefill a full one. prefillTokens (default 8192):
   * tokens per prefill pass, a longer prompt running in several. */
  static create(
    model: NativeModel,
    options: { slots: number; capacity: number; kvTokens?: number; keepPrefixes?: boolean; prefillTokens?: number },
  ): NativeGenerator {
    const lib = native();
    const handle = check(
      lib,
      lib.rlx_gen_create(model.handle, options.slots, options.capacity, options.kvTokens ?? 0),
    ) as Pointer;
    if (options.keepPrefixes === false) check(lib, lib.rlx_gen_set_option(handle, cstr("keep_prefixes"), 0));
    if (options.prefillTokens !== undefined)
      check(lib, lib.rlx_gen_set_option(handle, cstr("prefill_tokens"), options.prefillTokens));
    return new NativeGenerator(handle, options.slots, options.capacity);
  }

  get handle(): Pointer {
    if (this.#handle === null) throw new NativeError("this generator has been freed");
    return this.#handle;
  }

  freeSlots(): number {
    return check(native(), native().rlx_gen_free_slots(this.handle));
  }

  /**
   * Runs every later step on `model` (same architecture; the shim names a field that differs),
   * keeping the KV cache and the running sequences: tokens after the call are sampled by the new
   * weights over K/V the old ones computed. The old model is no longer used and may be freed.
   */
  setModel(model: NativeModel): void {
    check(native(), native().rlx_gen_set_model(this.handle, model.handle));
  }

  /**
   * Prefills the first of the prompts whose K/V fit the budget left (each up to its prompt +
   * maxNewTokens) as one batch, and returns each admitted one's first token, in order: fewer
   * tokens than requests means the rest must wait for running sequences to finish (none are
   * admitted only while some run).
   */
  add(requests: { prompt: ArrayLike<number>; sampling: SamplingParams }[]): GenToken[] {
    const n = requests.length;
    if (n === 0) return [];
    const lengths = Int32Array.from(requests, (r) => r.prompt.length);
    const prompts = new Int32Array(lengths.reduce((a, b) => a + b, 0));
    const sampling = new Float64Array(n * SAMPLING_FIELDS);
    const stopCounts = Int32Array.from(requests, (r) => r.sampling.stopTokenIds?.length ?? 0);
    const stops = new Int32Array(stopCounts.reduce((a, b) => a + b, 0));
    let at = 0;
    let stopAt = 0;
    requests.forEach(({ prompt, sampling: s }, i) => {
      prompts.set(tokenArray(prompt), at);
      at += prompt.length;
      sampling.set([s.temperature ?? 1, s.topP ?? 1, s.topK ?? 0, s.maxNewTokens, s.seed ?? 0], i * SAMPLING_FIELDS);
      stops.set(s.stopTokenIds ?? [], stopAt);
      stopAt += s.stopTokenIds?.length ?? 0;
    });
    const out = this.#outputs(n);
    const lib = native();
    const admitted = check(
      lib,
      lib.rlx_gen_add(
        this.handle,
        n,
        prompts,
        lengths,
        sampling,
        stops,
        stopCounts,
        out.slots,
        out.tokens,
        out.logprobs,
        out.finish,
      ),
    );
    return this.#read(out, admitted);
  }

  /** One decode step for every running sequence (empty when none is running). */
  step(): GenToken[] {
    const out = this.#outputs(this.slots);
    const lib = native();
    const count = check(
      lib,
      lib.rlx_gen_step(this.handle, out.slots, out.tokens, out.logprobs, out.finish, this.slots),
    );
    return this.#read(out, count);
  }

  /**
   * The k most likely tokens of each distribution the last add() or step() sampled from (`count`:
   * how many tokens it returned; entry j belongs to its token j), most likely first, as the
   * reported logprob is computed (tempered, full distribution), and the chosen token's 1-based
   * rank. The top-k is taken in the shim: only count * k values cross.
   */
  topLogprobs(count: number, k: number): TopLogprobs[] {
    const ids = new Int32Array(count * k);
    const logprobs = new Float32Array(count * k);
    const ranks = new Int32Array(count);
    const lib = native();
    check(lib, lib.rlx_gen_top_logprobs(this.handle, count, k, ids, logprobs, ranks));
    return Array.from({ length: count }, (_, j) => ({
      ids: Array.from(ids.subarray(j * k, (j + 1) * k)),
      logprobs: Array.from(logprobs.subarray(j * k, (j + 1) * k)),
      rank: ranks[j]!,
    }));
  }

  /** Since creation: prompts added, their tokens, and the tokens continued from K/V a slot kept
   * from an earlier sequence instead of prefilled; and the K/V cache now, in tokens (rlx.h
   * rlx_gen_cache_stats). */
  cacheStats(): CacheStats {
    const out = new BigInt64Array(8);
    check(native(), native().rlx_gen_cache_stats(this.handle, out, 8));
    const [prompts, promptTokens, reusedTokens, block, blocks, running, kept, reserved] = Array.from(out, Number);
    return {
      prompts: prompts!,
      promptTokens: promptTokens!,
      reusedTokens: reusedTokens!,
      kv: {
        blockTokens: block!,
        budgetTokens: blocks! * block!,
        runningTokens: running! * block!,
        keptTokens: kept! * block!,
        reservedTokens: reserved! * block!,
      },
    };
  }

  /** Cancels the sequence in a slot. */
  remove(slot: number): void {
    check(native(), native().rlx_gen_remove(this.handle, slot));
  }

  free(): void {
    if (this.#handle === null) return;
    const handle = this.#handle;
    this.#handle = null;
    check(native(), native().rlx_gen_free(handle));
  }

  [Symbol.dispose](): void {
    this.free();
  }

  #outputs(n: number): GenOutputs {
    return {
      slots: new Int32Array(n),
      tokens: new Int32Array(n),
      logprobs: new Float32Array(n),
      finish: new Int32Array(n),
    };
  }

  #read(out: GenOutputs, count: number): GenToken[] {
    return Array.from({ length: count }, (_, j) => ({
      slot: out.slots[j]!,
      token: out.tokens[j]!,
      logprob: out.logprobs[j]!,
      finish: FINISH[out.finish[j]!] ?? null,
    }));
  }
}

/**
 * Generates a completion for each prompt, up to `slots` at a time (default: all of them), within
 * kvTokens of K/V (default slots x the longest prompt + max tokens). `sampling` is one setting
 * for all prompts or one per prompt.
 */
export function generate(
  model: NativeModel,
  prompts: ArrayLike<number>[],
  sampling: SamplingParams | SamplingParams[],
  options: { slots?: number; kvTokens?: number } = {},
): Completion[] {
  const settings = prompts.map((_, i) => (Array.isArray(sampling) ? sampling[i] : sampling));
  if (settings.some((s) => s === undefined))
    throw new NativeError(
      `generate: ${prompts.length} prompts but ${(sampling as SamplingParams[]).length} sampling settings`,
    );
  const capacity = Math.max(2, ...prompts.map((p, i) => p.length + settings[i]!.maxNewTokens));
  const slots = Math.max(1, Math.min(options.slots ?? prompts.length, prompts.length));
  const results: { tokens: number[]; logprobs: number[]; finish: FinishReason | null }[] = prompts.map(() => ({
    tokens: [],
    logprobs: [],
    finish: null,
  }));
  const owner = new Map<number, number>(); // slot -> prompt index
  using gen = NativeGenerator.create(model, { slots, capacity, kvTokens: options.kvTokens });
  const record = (produced: GenToken[]) => {
    for (const t of produced) {
      const r = results[owner.get(t.slot)!]!;
      r.tokens.push(t.token);
      r.logprobs.push(t.logprob);
      if (t.finish) ((r.finish = t.finish), owner.delete(t.slot));
    }
  };
  let next = 0;
  while (next < prompts.length || owner.size > 0) {
    const admit: number[] = [];
    while (next < prompts.length && owner.size + admit.length < slots) admit.push(next++);
    if (admit.length) {
      const first = gen.add(admit.map((i) => ({ prompt: prompts[i]!, sampling: settings[i]! })));
      first.forEach((t, j) => owner.set(t.slot, admit[j]!));
      next -= admit.length - first.length; // what did not fit the K/V budget waits
      record(first);
    }
    if (owner.size > 0) record(gen.step());
  }
  return results.map((r) => ({ tokens: r.tokens, logprobs: r.logprobs, finish: r.finish ?? "length" }));
}

export interface ScoreOptions {
  /** One temperature for every token, or one per token of each sequence. Default 1. */
  temperature?: number | Float32Array[];
  /** Tokens per packed forward row (default 4096; <= 0: all in one row). */
  rowTokens?: number;
  entropy?: boolean;
}

/** Sequences as the shim's scoring calls take them: all ids end to end, and each one's length. */
export function concatSequences(sequences: ArrayLike<number>[]): {
  ids: Int32Array;
  lengths: Int32Array;
  total: number;
} {
  const lengths = Int32Array.from(sequences, (s) => s.length);
  const total = lengths.reduce((a, b) => a + b, 0);
  const ids = new Int32Array(total);
  let at = 0;
  for (const s of sequences) (ids.set(tokenArray(s), at), (at += s.length));
  return { ids, lengths, total };
}

/**
 * Prefill logprobs of each token of each sequence under the model: element t is
 * log p(token t | tokens before it); element 0 has no prediction and is 0.
 */
export function score(
  model: NativeModel,
  sequences: ArrayLike<number>[],
  options: ScoreOptions = {},
): { logprobs: Float32Array[]; entropy?: Float32Array[] } {
  const { ids, lengths, total } = concatSequences(sequences);
  let at = 0;
  let temps: Float32Array | null = null;
  if (options.temperature !== undefined) {
    temps = new Float32Array(total);
    if (typeof options.temperature === "number") temps.fill(options.temperature);
    else {
      if (options.temperature.length !== sequences.length)
        throw new NativeError("score: one temperature array per sequence is needed");
      at = 0;
      options.temperature.forEach((t, i) => {
        if (t.length !== lengths[i])
          throw new NativeError(
            `score: temperatures of sequence ${i} have ${t.length} entries, the sequence has ${lengths[i]}`,
          );
        (temps!.set(t, at), (at += t.length));
      });
    }
  }
  const logprobs = new Float32Array(total);
  const entropy = options.entropy ? new Float32Array(total) : null;
  const lib = native();
  check(
    lib,
    lib.rlx_score(
      model.handle,
      total,
      ids,
      lengths,
      sequences.length,
      temps,
      options.rowTokens ?? 4096,
      logprobs,
      entropy,
    ),
  );
  const split = (flat: Float32Array) => {
    let start = 0;
    return Array.from(lengths, (n) => flat.subarray(start, (start += n)));
  };
  return { logprobs: split(logprobs), ...(entropy ? { entropy: split(entropy) } : {}) };
}
