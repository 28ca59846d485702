// A rollout's token sequence as its turns are sampled, shared by the rollout driver (driver.ts: rlx
// runs the turns) and the env-driven endpoint (served.ts: the env asks for them). Tokens in, tokens
// out: the sampled ids are appended as they came back and never re-tokenized; the messages that
// follow a turn are the template's tokens for them (ChatRenderer.bridge), and when the template does
// not extend its previous rendering a new sample starts from a fresh rendering, recorded in
// `info.extensionBreaks`. Also the limits an episode runs into (its deadline).
import type { ChatMessage } from "../data/chat.ts";
import { parseAssistant, type ParsedAssistant } from "../model/parse.ts";
import type { AttributedTokens, ChatRenderer, RenderOptions } from "../model/render.ts";
import type { Completion } from "../clients/types.ts";
import type { Rollout } from "../data/types.ts";

/** A limit the episode ran into; the rollout records it as its error. */
export class RolloutLimit extends Error {}

/** Awaits `work`, or rejects with a RolloutLimit when the episode's deadline passes first. */
export function raceDeadline<T>(work: Promise<T> | T, deadline: number): Promise<T> {
  const left = deadline - performance.now();
  if (!Number.isFinite(left)) return Promise.resolve(work);
  if (left <= 0) return Promise.reject(new RolloutLimit("rollout timed out"));
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

/** The token sequence of a rollout being sampled: the current sample's ids and its rendered text. */
export class RolloutTokens {
  /** The current sample's token ids: the next turn's prompt. */
  sequence: number[] = [];
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

  /** Renders the rollout's messages so far as a new sample (the first, or after a break). */
  render(options: RenderOptions): void {
    const fresh = this.renderer.render(this.rollout.messages, options);
    if (this.sequence.length > 0) {
      this.sample++;
      this.breaks.push({ turn: this.rollout.numTurns, sample: this.sample });
    }
    this.append(fresh);
    this.sequence = fresh.tokenIds;
    this.templateText = fresh.text;
  }

  /** Appends a sampled turn (its tokens, logprobs and version) and the assistant message parsed from it. */
  sampled(completion: Completion, temperature: number): ParsedAssistant {
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
    const parsed = parseAssistant(tokenizer.decode(completion.tokenIds), this.stopStrings);
    rollout.messages.push(parsed.message);
    return parsed;
  }

  /** After the last sampled turn, `rollout.messages` gained messages: appends their tokens (the
   * template's, bridged onto the sample) or, when the template does not extend, starts a new sample. */
  extend(completion: Completion, options: RenderOptions): void {
    const tokenizer = this.renderer.tokenizer;
    const assistantIndex = this.rollout.segments.findLast((s) => s.sampled)!.messageIndex;
    const stopId = completion.tokenIds.at(-1);
    const stopText = stopId === undefined ? undefined : tokenizer.tokenString(stopId);
    const bridged =
      stopText && tokenizer.stopIds.includes(stopId!)
        ? this.renderer.bridge(
            this.templateText,
            this.rollout.messages,
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
      const messageIndex = tokens.messageIndex[i]!;
      let end = i;
      while (end < tokens.tokenIds.length && tokens.messageIndex[end] === messageIndex) end++;
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
