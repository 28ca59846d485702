// POST /v1/completions: text or token-id prompts (one or a batch), n samples each, optional
// sampled-token logprobs and vLLM's prompt_logprobs, streamed or not. The logprobs are the
// trainer's: log_softmax(logits / temperature) of the sampled token over the full vocabulary
// (vLLM's default reports the raw, temperature-1 logprobs instead); prompt_logprobs are the
// model's raw (temperature 1) prefill logprobs, from the same native scoring call the trainer uses.
import { Fields } from "./fields.ts";
import { InvalidRequestError } from "./errors.ts";
import { type ServeContext, tokenString } from "./choice.ts";
import { checkCapacity, planPrompt, servedVersion, startChoices } from "./generation.ts";
import { completionLogprobs, nowSeconds, type PromptLogprob, requestId, usage } from "./openai.ts";
import { completionParams } from "./params.ts";
import { sseResponse } from "./sse.ts";
import { checkModelName } from "./models.ts";

export async function handleCompletions(ctx: ServeContext, request: Request): Promise<Response> {
  const params = completionParams(Fields.parse(await request.text()), ctx.engine.vocabSize);
  checkModelName(ctx, params.model);
  if (params.stream && params.promptLogprobs)
    throw new InvalidRequestError("prompt_logprobs is not supported with stream: true in rlx serve", "prompt_logprobs");
  const planned = params.prompts.map((p, i) => {
    const tokens = typeof p === "string" ? ctx.tokenizer.encode(p) : p;
    return planPrompt(ctx, tokens, params, params.prompts.length > 1 ? `prompt[${i}]` : "prompt");
  });
  const promptLogprobs = params.promptLogprobs
    ? promptLogprobRows(
        ctx,
        planned.map((p) => p.tokens),
        params.tokensAsIds,
      )
    : null;
  const promptTokens = planned.reduce((sum, p) => sum + p.tokens.length, 0);
  const abort = new AbortController();
  request.signal.addEventListener("abort", () => abort.abort(), { once: true });
  const id = requestId("cmpl");
  const created = nowSeconds();
  const model = ctx.modelName;

  if (params.stream) {
    checkCapacity(ctx, planned.length * params.n);
    return sseResponse(
      async (send) => {
        let completionTokens = 0;
        const choices = await startChoices(ctx, planned, params, abort, (d) => {
          completionTokens += d.tokens.length;
          send({
            id,
            object: "text_completion",
            created,
            model,
            choices: [
              {
                index: d.index,
                text: d.text,
                logprobs: params.logprobs ? completionLogprobs(d.tokenStrings, d.logprobs, d.textOffsets) : null,
                finish_reason: d.finishReason,
                stop_reason: d.stopReason,
              },
            ],
            policy_version: d.version,
          });
        });
        if (params.includeUsage)
          send({
            id,
            object: "text_completion",
            created,
            model,
            choices: [],
            usage: usage(promptTokens, completionTokens),
            policy_version: servedVersion(choices, ctx.engine.version),
          });
      },
      () => abort.abort(),
    );
  }

  const choices = await startChoices(ctx, planned, params, abort);
  return Response.json({
    id,
    object: "text_completion",
    created,
    model,
    choices: choices.map((c) => {
      const prompt = planned[Math.floor(c.index / params.n)]!;
      return {
        index: c.index,
        text: c.text,
        logprobs: params.logprobs ? completionLogprobs(c.tokenStrings, c.logprobs, c.textOffsets) : null,
        finish_reason: c.finishReason,
        stop_reason: c.stopReason,
        prompt_logprobs: promptLogprobs ? promptLogprobs[Math.floor(c.index / params.n)]! : null,
        ...(params.returnTokenIds ? { prompt_token_ids: prompt.tokens, token_ids: c.tokens } : {}),
        policy_version: c.version,
      };
    }),
    usage: usage(
      promptTokens,
      choices.reduce((sum, c) => sum + c.tokens.length, 0),
    ),
    system_fingerprint: null,
    policy_version: servedVersion(choices, ctx.engine.version),
  });
}

/**
 * vLLM's prompt_logprobs per prompt: null for the first token, then {token_id: {logprob, rank,
 * decoded_token}}. All prompts of the request are scored in one native call. `rank` is null: the
 * native scorer returns the token's logprob, not the whole distribution.
 */
function promptLogprobRows(ctx: ServeContext, prompts: number[][], asIds: boolean): (PromptLogprob | null)[][] {
  const { logprobs } = ctx.engine.score(prompts);
  return prompts.map((tokens, p) =>
    tokens.map((token, i) =>
      i === 0
        ? null
        : {
            [String(token)]: {
              logprob: logprobs[p]![i]!,
              rank: null,
              decoded_token: tokenString(ctx.tokenizer, token, asIds),
            },
          },
    ),
  );
}
