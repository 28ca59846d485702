// What the batching engine (src/engine/engine.ts) accepts, checked before anything reaches the
// shim: its own settings, prompts and scored sequences inside the vocabulary and the context length, alternatives
// per token up to max_logprobs, and reloaded weights of the served architecture. Every refusal is an InvalidRequestError naming the request
// field, so `rlx serve` answers it with a 400 in OpenAI's error shape.
import type { NativeModel } from "../native/model.ts";
import { EngineClosedError, InvalidRequestError, QueueFullError } from "./errors.ts";
import { type EngineOptions, type EngineRequest, RELOAD_MODES, type ReloadMode } from "./engine_api.ts";

export interface Limits {
  vocabSize: number;
  /** Prompt plus generated tokens per sequence. */
  maxModelLen: number;
}

/** A generation request: a non-empty prompt of known ids, and room for max_tokens after it. */
export function checkRequest(prompt: readonly number[], maxNewTokens: number, limits: Limits): void {
  const { vocabSize, maxModelLen } = limits;
  if (prompt.length === 0) throw new InvalidRequestError("the prompt is empty", "prompt");
  const bad = prompt.findIndex((t) => !Number.isInteger(t) || t < 0 || t >= vocabSize);
  if (bad >= 0)
    throw new InvalidRequestError(
      `prompt token ${bad} is ${prompt[bad]}, outside the vocabulary 0..${vocabSize - 1}`,
      "prompt",
    );
  if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1)
    throw new InvalidRequestError(`max_tokens must be a positive integer, got ${maxNewTokens}`, "max_tokens");
  if (prompt.length + maxNewTokens > maxModelLen) {
    throw new InvalidRequestError(
      `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${prompt.length + maxNewTokens} tokens (${prompt.length} in the messages, ${maxNewTokens} in the completion). Please reduce the length of the messages or completion.`,
      prompt.length >= maxModelLen ? "prompt" : "max_tokens",
      { fix: "shorten the prompt or max_tokens, or start the server with a larger --max-model-len" },
    );
  }
}

/** Throws why the engine cannot queue `request` now: shutting down, invalid, or its queue full. */
export function checkSubmit(
  request: EngineRequest,
  engine: { closed: boolean; queued: number; running: number; maxQueue: number; maxLogprobs: number },
  limits: Limits,
): void {
  if (engine.closed)
    throw new EngineClosedError("the inference engine is shutting down", { fix: "retry against a running server" });
  checkRequest(request.prompt, request.sampling.maxNewTokens, limits);
  const seed = request.sampling.seed;
  if (seed !== undefined && !(Number.isInteger(seed) && seed >= 0 && seed < 2 ** 53))
    throw new InvalidRequestError(`seed must be an integer in [0, 2^53), got ${seed}`, "seed");
  checkTopCount(request.topLogprobs ?? 0, engine.maxLogprobs, "logprobs");
  if (engine.queued >= engine.maxQueue)
    throw new QueueFullError(`the request queue is full (${engine.maxQueue} waiting, ${engine.running} running)`, {
      fix: "retry with backoff, or start the server with a larger --max-queue",
    });
}

/** How many alternatives per token a request asks for (logprobs, top_logprobs, prompt_logprobs). */
export function checkTopCount(n: number, maxLogprobs: number, field: string): void {
  if (!Number.isInteger(n) || n < 0 || n > maxLogprobs)
    throw new InvalidRequestError(`${field} = ${n} must be an integer in 0..${maxLogprobs} (max_logprobs)`, field, {
      fix: "ask for fewer alternatives, or start the server with a larger --max-logprobs",
    });
}

/** Sequences to score: each non-empty, of known ids, within the context length. */
export function checkSequences(sequences: readonly (readonly number[])[], limits: Limits): void {
  const { vocabSize, maxModelLen } = limits;
  sequences.forEach((seq, i) => {
    const bad = seq.findIndex((t) => !Number.isInteger(t) || t < 0 || t >= vocabSize);
    if (seq.length === 0) throw new InvalidRequestError(`sequence ${i} is empty`, "prompt");
    if (bad >= 0)
      throw new InvalidRequestError(
        `sequence ${i}: token ${bad} is ${seq[bad]}, outside the vocabulary 0..${vocabSize - 1}`,
        "prompt",
      );
    if (seq.length > maxModelLen)
      throw new InvalidRequestError(
        `sequence ${i} has ${seq.length} tokens, more than the maximum context length ${maxModelLen}`,
        "prompt",
      );
  });
}

/** Loads `dir` in full and refuses it (freed) unless its config equals the served model's. */
export async function loadSameArchitecture(
  dir: string,
  served: NativeModel,
  load: (dir: string) => Promise<NativeModel>,
): Promise<NativeModel> {
  const model = await load(dir);
  const [want, got] = [served.config, model.config];
  const differs = (Object.keys(want) as (keyof typeof want)[]).find((key) => want[key] !== got[key]);
  if (differs) {
    model.free();
    throw new InvalidRequestError(
      `${dir}: config.json has ${differs} = ${got[differs]}, the served model has ${want[differs]}`,
      "path",
      {
        fix: "publish weights of the same architecture as the served model",
      },
    );
  }
  return model;
}

/** The engine's batch, context and reload settings, defaulted and checked against the model. */
export function checkEngineOptions(
  model: NativeModel,
  options: EngineOptions,
): { maxBatch: number; maxModelLen: number; kvTokens: number | undefined; reloadMode: ReloadMode } {
  if (!Number.isInteger(options.maxBatch) || options.maxBatch < 1)
    throw new InvalidRequestError(`maxBatch must be a positive integer, got ${options.maxBatch}`, "max_batch");
  const positions = model.config.max_position_embeddings;
  const maxModelLen = options.maxModelLen ?? Math.min(positions, 2048);
  if (!Number.isInteger(maxModelLen) || maxModelLen < 2 || maxModelLen > positions)
    throw new InvalidRequestError(
      `maxModelLen must be an integer in 2..${positions} (the model's max_position_embeddings), got ${maxModelLen}`,
      "max_model_len",
    );
  const kvTokens = options.kvTokens;
  if (kvTokens !== undefined && (!Number.isInteger(kvTokens) || kvTokens < maxModelLen))
    throw new InvalidRequestError(
      `kvTokens must be an integer of at least maxModelLen (${maxModelLen}): the cache must hold one whole sequence, got ${kvTokens}`,
      "kv_tokens",
      {
        fix: `give rlx serve --kv-tokens (or [inference] kv_tokens) at least ${maxModelLen}, or a smaller --max-model-len`,
      },
    );
  const reloadMode = options.reloadMode ?? "drain";
  if (!RELOAD_MODES.includes(reloadMode))
    throw new InvalidRequestError(
      `reloadMode must be one of ${RELOAD_MODES.join(", ")}, got ${reloadMode}`,
      "reload_mode",
    );
  return { maxBatch: options.maxBatch, maxModelLen, kvTokens, reloadMode };
}
