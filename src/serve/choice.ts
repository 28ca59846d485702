// One choice of a completion or chat request: submit the prompt to the engine, turn its tokens
// into text as they come (stop strings end the sequence in the step that completes them, which
// frees the slot at once), and hand streaming consumers their deltas. Tokens and logprobs always
// include the final stop token (the trainer needs the exact sampled sequence); its text is left
// out unless include_stop_str_in_output, as in vLLM.
import type { TopLogprobs } from "../native/generate.ts";
import type { Tokenizer } from "../model/tokenizer.ts";
import { TextTracker } from "./detok.ts";
import type { Engine } from "../engine/engine.ts";
import type { ChoiceOut, FinishReasonOut } from "./openai.ts";
import type { SamplingSpec } from "./params.ts";

export interface ServeContext {
  engine: Engine;
  tokenizer: Tokenizer;
  /** The model name clients must send (the /v1/models id). */
  modelName: string;
}

/** A piece of a choice for streaming; finishReason is set on the last one. */
export type ChoiceDelta = Omit<ChoiceOut, "finishReason"> & { finishReason: FinishReasonOut | null };

export interface ChoiceJob {
  index: number;
  prompt: number[];
  spec: SamplingSpec;
  maxTokens: number;
  seed: number | undefined;
  signal: AbortSignal;
  onDelta?: (delta: ChoiceDelta) => void;
}

export function tokenString(tokenizer: Tokenizer, token: number, asIds: boolean): string {
  return asIds ? `token_id:${token}` : tokenizer.decode([token]);
}

/** Submits one choice (synchronously: the engine has it queued when this returns) and resolves when it ends. */
export function runChoice(ctx: ServeContext, job: ChoiceJob): Promise<ChoiceOut> {
  const { spec, onDelta } = job;
  const tokenizer = ctx.tokenizer;
  const stopIds = new Set([...(spec.ignoreEos ? [] : tokenizer.stopIds), ...spec.stopTokenIds]);
  const tracker = new TextTracker(tokenizer, {
    skipSpecialTokens: spec.skipSpecialTokens,
    stopStrings: spec.stopStrings,
    includeStopStr: spec.includeStopStr,
  });
  const tokens: number[] = [];
  const logprobs: number[] = [];
  const tops: TopLogprobs[] = [];
  let delivered = 0;
  const delta = (
    text: string,
    finishReason: FinishReasonOut | null,
    stopReason: string | number | null,
    version: number,
  ): ChoiceDelta => {
    const part = tokens.slice(delivered);
    const from = delivered;
    delivered = tokens.length;
    return {
      index: job.index,
      text,
      tokens: part,
      logprobs: logprobs.slice(from),
      tops: tops.slice(from),
      tokenStrings: part.map((t) => tokenString(tokenizer, t, spec.tokensAsIds)),
      textOffsets: tracker.offsets.slice(from),
      finishReason,
      stopReason,
      version,
    };
  };

  const submitted = ctx.engine.submit({
    prompt: job.prompt,
    sampling: {
      temperature: spec.temperature,
      topP: spec.topP,
      topK: spec.topK,
      maxNewTokens: job.maxTokens,
      stopTokenIds: [...stopIds],
      ...(job.seed === undefined ? {} : { seed: job.seed }),
    },
    signal: job.signal,
    ...(spec.user === undefined ? {} : { tag: spec.user }),
    topLogprobs: spec.topLogprobs,
    onToken: (token, logprob, finish, top) => {
      tokens.push(token);
      logprobs.push(logprob);
      if (top) tops.push(top);
      const isStopToken = finish === "stop" && stopIds.has(token);
      tracker.push(token, !isStopToken || spec.includeStopStr);
      if (onDelta && finish === null && tracker.stopped === null) {
        const text = tracker.takeDelta(false);
        if (text !== "" || spec.logprobs) onDelta(delta(text, null, null, ctx.engine.version));
      }
      return tracker.stopped !== null;
    },
  });

  return submitted.then((result) => {
    tracker.finish();
    const last = result.tokens[result.tokens.length - 1];
    const stopReason =
      tracker.stopped ??
      (result.finish === "stop" && last !== undefined && spec.stopTokenIds.includes(last) ? last : null);
    const finishReason: FinishReasonOut = tracker.stopped !== null ? "stop" : result.finish;
    if (onDelta) onDelta(delta(tracker.takeDelta(true), finishReason, stopReason, result.version));
    return {
      index: job.index,
      text: tracker.text,
      tokens: result.tokens,
      logprobs: result.logprobs,
      tops: result.topLogprobs ?? [],
      tokenStrings: result.tokens.map((t) => tokenString(tokenizer, t, spec.tokensAsIds)),
      textOffsets: tracker.offsets,
      finishReason,
      stopReason,
      version: result.version,
    };
  });
}
