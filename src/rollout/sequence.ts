// A rollout's token sequence as its turns are sampled, shared by the rollout driver (driver.ts: rlx
// runs the turns) and the env-driven endpoint (served.ts: the env asks for them). Tokens in, tokens
// out: the sampled ids are appended as they came back and never re-tokenized; the messages that
// follow a turn are the template's tokens for them (ChatRenderer.bridge), and when the template does
// not extend its previous rendering a new sample starts from a fresh rendering, recorded in
// `info.extensionBreaks`. Also the limits an episode runs into (its deadline).
import type { ChatMessage } from "../data/chat.ts";
import { parseAssistant, type ParsedAssistant } from "../model/parse.ts";
import type { AttributedTokens, ChatRenderer, RenderOptions } from "../model/render.ts";
import type { Completion, SamplingClient } from "../clients/types.ts";
import type { Rollout } from "../data/types.ts";

export interface SamplingParams {
  maxTokens: number;
  temperature: number;
  topP: number;
  topK: number;
  /** Turn t is sampled with seed + t. */
  seed?: number;
}

/** A limit the episode ran into; the rollout records it as its error. */
export class RolloutLimit extends Error {}

/** The next turn's prompt leaves no room under the context limit. */
export class ContextLimit extends RolloutLimit {}

/** What a multi-turn episode does when its next prompt reaches the context limit (the env's
 * context_limit): fail, or end there (stop reason "context"). */
export type ContextLimitPolicy = "error" | "truncate";

/** Whether `err` ends the episode at the context limit instead of failing it: the policy says
 * truncate and a turn was sampled already (a first prompt past the limit is the config's error). */
export function endsAtContext(err: unknown, policy: ContextLimitPolicy | undefined, numTurns: number): boolean {
  return err instanceof ContextLimit && policy === "truncate" && numTurns > 0;
}

/** Awaits `work`, or rejects with a RolloutLimit when the episode's deadline passes first. */
export function raceDeadline<T>(work: Promise<T> | T, deadline: number): Promise<T> {
  const left = deadline - performance.now();
  if (!Number.isFinite(left)) return Promise.resolve(work);
  if (left <= 0) {
    Promise.resolve(work).catch(() => {}); // already sent: its late failure is no one's to handle
    return Promise.reject(new RolloutLimit("rollout timed out"));
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RolloutLimit("rollout timed out")), left);
  });
  return Promise.race([Promise.resolve(work), timeout]).finally(() => clearTimeout(timer));
}

export function checkCompletion(completion: Completion): void {
  if (completion.logprobs.length !== completion.tokenIds.length) {
    throw new Error(
      `sampling client returned ${completion.tokenIds.length} tokens but ${completion.logprobs.length} logprobs`,
    );
  }
  if (completion.logprobs.some((lp) => !Number.isFinite(lp) || lp > 1e-6))
    throw new Error("sampling client returned a logprob that is not finite and <= 0");
}

/** A sampled turn: the assistant message parsed from it, and its text as decoded (stop token aside). */
export interface SampledTurn extends ParsedAssistant {
  text: string;
}

/** The token sequence of a rollout being sampled: the current sample's ids and its rendered text. */
export class RolloutTokens {
  /** The current sample's token ids: the next turn's prompt. */
  sequence: number[] = [];
  /** Where the current sample's conversation starts in `rollout.messages` (after a rewrite, served.ts). */
  from = 0;
  private templateText = "";
  private sample = 0;
  private readonly breaks: Array<{ turn: number; sample: number }> = [];
  private readonly finishReasons: string[] = [];
  private readonly stopStrings: string[];

  constructor(
    private readonly rollout: Rollout,
    private readonly renderer: ChatRenderer,
  ) {
    const tokenizer = renderer.tokenizer;
    this.stopStrings = tokenizer.stopIds.map((id) => tokenizer.tokenString(id) ?? "").filter((s) => s);
    rollout.info.finishReasons = this.finishReasons;
    rollout.info.extensionBreaks = this.breaks;
  }

  /** Renders the rollout's messages from `from` on as a new sample (the first, after a break, or
   * a conversation that starts there). */
  render(options: RenderOptions, from = this.from): void {
    this.from = from;
    const fresh = this.renderer.render(this.rollout.messages.slice(from), options);
    if (this.sequence.length > 0) {
      this.sample++;
      this.breaks.push({ turn: this.rollout.numTurns, sample: this.sample });
    }
    this.append(fresh);
    this.sequence = fresh.tokenIds;
    this.templateText = fresh.text;
  }

  /** Asks `client` for the next turn of the current sample with the run's sampling settings (turn
   * t seeded seed + t), at most `maxTokens` and what the context limit leaves; past the limit, a
   * RolloutLimit. */
  async next(
    client: SamplingClient,
    sampling: SamplingParams,
    maxContext: number,
    maxTokens = sampling.maxTokens,
  ): Promise<Completion> {
    const room = maxContext - this.sequence.length;
    if (room <= 0)
      throw new ContextLimit(
        `context limit: the prompt has ${this.sequence.length} tokens, max_context_tokens is ${maxContext}` +
          (this.rollout.numTurns > 0
            ? `; set the env's context_limit = "truncate" to end such episodes there instead`
            : ""),
      );
    const { seed } = sampling;
    return client.complete({
      promptIds: this.sequence,
      maxTokens: Math.min(maxTokens, room),
      temperature: sampling.temperature,
      topP: sampling.topP,
      topK: sampling.topK,
      stop: this.renderer.tokenizer.stopIds,
      seed: seed === undefined ? undefined : seed + this.rollout.numTurns,
      session: this.rollout.id,
    });
  }

  /** Appends a sampled turn (its tokens, logprobs and version) and the assistant message parsed from
   * it; with `asText`, a turn with a tool call that does not parse is kept as its text, as vLLM's
   * tool parser returns it (an env served elsewhere then sees what the model wrote). */
  sampled(completion: Completion, temperature: number, asText = false): SampledTurn {
    checkCompletion(completion);
    const tokenizer = this.renderer.tokenizer;
    const rollout = this.rollout;
    this.finishReasons.push(completion.finishReason);
    if (rollout.numTurns === 0) rollout.policyVersion = completion.policyVersion;
    rollout.numTurns++;
    rollout.segments.push({
      role: "assistant",
      tokenIds: completion.tokenIds,
      sampled: true,
      logprobs: completion.logprobs,
      isContent: completion.tokenIds.map((id) => !tokenizer.specialIds.has(id)),
      messageIndex: rollout.messages.length,
      sample: this.sample,
      policyVersion: completion.policyVersion,
      // The temperature the logprobs are taken at: greedy (0) reports temperature-1 logprobs.
      temperature: temperature > 0 ? temperature : 1,
    });
    this.sequence = [...this.sequence, ...completion.tokenIds];
    let text = tokenizer.decode(completion.tokenIds);
    while (this.stopStrings.some((stop) => text.endsWith(stop)))
      text = text.slice(0, -this.stopStrings.find((stop) => text.endsWith(stop))!.length);
    const parsed = parseAssistant(text);
    const malformed = parsed.blocks.some((block) => "error" in block);
    const message: ChatMessage = asText && malformed ? { role: "assistant", content: text } : parsed.message;
    rollout.messages.push(message);
    return { ...parsed, message, text };
  }

  /** After the last sampled turn, `rollout.messages` gained messages: appends their tokens (the
   * template's, bridged onto the sample) or, when the template does not extend, starts a new sample. */
  extend(completion: Completion, options: RenderOptions): void {
    const tokenizer = this.renderer.tokenizer;
    const assistantIndex = this.rollout.segments.findLast((s) => s.sampled)!.messageIndex - this.from;
    const stopId = completion.tokenIds.at(-1);
    const stopText = stopId === undefined ? undefined : tokenizer.tokenString(stopId);
    const bridged =
      stopText && tokenizer.stopIds.includes(stopId!)
        ? this.renderer.bridge(
            this.templateText,
            this.rollout.messages.slice(this.from),
            assistantIndex,
            stopText,
            options,
            tokenizer.decode(completion.tokenIds),
          )
        : null;
    if (!bridged) return this.render(options);
    this.append(bridged.tokens);
    this.sequence = [...this.sequence, ...bridged.tokens.tokenIds];
    this.templateText = bridged.text;
  }

  /** Samples in the rollout so far. */
  get numSamples(): number {
    return this.sample + 1;
  }

  /** Splits attributed tokens into segments, one per run of tokens of the same message. */
  private append(tokens: AttributedTokens): void {
    const rollout = this.rollout;
    for (let i = 0; i < tokens.tokenIds.length;) {
      const messageIndex = this.from + tokens.messageIndex[i]!;
      let end = i;
      while (end < tokens.tokenIds.length && this.from + tokens.messageIndex[end]! === messageIndex) end++;
      rollout.segments.push({
        role: (rollout.messages[messageIndex] as ChatMessage | undefined)?.role ?? "assistant", // past the end: the generation prompt
        tokenIds: tokens.tokenIds.slice(i, end),
        sampled: false,
        isContent: tokens.isContent.slice(i, end),
        messageIndex,
        sample: this.sample,
      });
      i = end;
    }
  }
}
