// Starts every choice of a request (prompts x n) as one unit: all of them are validated against the
// context limit first and queued in the same tick, or none is (a 400 or a 429 never leaves
// orphans generating), and when one fails or the client goes away the rest are aborted.
import { InvalidRequestError, QueueFullError } from "../engine/errors.ts";
import { type ChoiceDelta, runChoice, type ServeContext } from "./choice.ts";
import type { ChoiceOut } from "./openai.ts";
import type { SamplingSpec } from "./params.ts";

export interface PlannedPrompt {
  tokens: number[];
  maxTokens: number;
}

/** Resolves max_tokens for a prompt and checks it fits; `promptParam` names the prompt's field in errors. */
export function planPrompt(
  ctx: ServeContext,
  tokens: number[],
  spec: SamplingSpec,
  promptParam: string,
): PlannedPrompt {
  const maxTokens = spec.maxTokens ?? ctx.engine.maxModelLen - tokens.length;
  if (maxTokens < 1) {
    throw new InvalidRequestError(
      `the prompt has ${tokens.length} tokens; the maximum context length is ${ctx.engine.maxModelLen}, which leaves no room to generate`,
      promptParam,
    );
  }
  try {
    ctx.engine.validate(tokens, maxTokens);
  } catch (err) {
    if (err instanceof InvalidRequestError && err.param === "prompt" && promptParam !== "prompt")
      throw new InvalidRequestError(err.message, promptParam, err.fix ? { fix: err.fix } : {});
    throw err;
  }
  return { tokens, maxTokens };
}

/**
 * Throws unless `count` more sequences fit in the queue now: a 400 naming `n` when they never
 * can, a 429 when they cannot yet. Streaming handlers call it before sending the 200 headers.
 */
export function checkCapacity(ctx: ServeContext, count: number): void {
  if (count > ctx.engine.maxQueue) {
    throw new InvalidRequestError(
      `the request asks for ${count} sequences (prompts x n); this server queues at most ${ctx.engine.maxQueue}`,
      "n",
      { fix: "split the request, or start the server with a larger --max-queue" },
    );
  }
  if (!ctx.engine.canAccept(count)) {
    throw new QueueFullError(
      `the request queue is full (${ctx.engine.load.queued} waiting for ${ctx.engine.maxBatch} slots)`,
      { fix: "retry with backoff" },
    );
  }
}

/** Choice i*n + j is sample j of prompt i (vLLM's order), seeded seed + j when a seed is given. */
export function startChoices(
  ctx: ServeContext,
  prompts: PlannedPrompt[],
  spec: SamplingSpec,
  abort: AbortController,
  onDelta?: (delta: ChoiceDelta) => void,
): Promise<ChoiceOut[]> {
  checkCapacity(ctx, prompts.length * spec.n);
  const running = prompts.flatMap((prompt, i) =>
    Array.from({ length: spec.n }, (_, j) =>
      runChoice(ctx, {
        index: i * spec.n + j,
        prompt: prompt.tokens,
        spec,
        maxTokens: prompt.maxTokens,
        seed: spec.seed === undefined ? undefined : (spec.seed + j) % 2 ** 53,
        signal: abort.signal,
        ...(onDelta ? { onDelta } : {}),
      }),
    ),
  );
  return Promise.all(running).catch((err) => {
    abort.abort();
    throw err;
  });
}

/** The oldest weights version among the choices (all equal unless a reload landed between them). */
export function servedVersion(choices: { version: number }[], fallback: number): number {
  return choices.length === 0 ? fallback : Math.min(...choices.map((c) => c.version));
}
