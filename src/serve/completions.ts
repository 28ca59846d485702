// POST /v1/completions: text or token-id prompts (one or a batch), n samples each, optional
// logprobs with N alternatives per token, vLLM's prompt_logprobs and echo, streamed or not. The
// logprobs are the trainer's: log_softmax(logits / temperature) of the sampled token over the full
// vocabulary (vLLM's default reports the raw, temperature-1 logprobs instead), and the
// alternatives are the most likely tokens of that same distribution; prompt_logprobs and echoed
// prompt logprobs are the model's raw (temperature 1) prefill logprobs (prompt_scores.ts).
import { Fields } from "./fields.ts";
import { InvalidRequestError } from "../engine/errors.ts";
import { type ServeContext, tokenString } from "./choice.ts";
import { checkCapacity, planPrompt, servedVersion, startChoices } from "./generation.ts";
import { completionLogprobs, nowSeconds, requestId, type Spell, usage } from "./openai.ts";
import { completionParams } from "./params.ts";
import { echoPrompt, promptLogprobRow, scorePrompts } from "./prompt_scores.ts";
import { sseResponse } from "./sse.ts";
import { checkModelName } from "./models.ts";

export async function handleCompletions(ctx: ServeContext, request: Request): Promise<Response> {
  const params = completionParams(Fields.parse(await request.text()), ctx.engine.vocabSize, ctx.engine.maxLogprobs);
  checkModelName(ctx, params.model);
  if (params.stream && params.promptLogprobs)
    throw new InvalidRequestError("prompt_logprobs is not supported with stream: true in rlx serve", "prompt_logprobs");
  const planned = params.prompts.map((p, i) => {
    const tokens = typeof p === "string" ? ctx.tokenizer.encode(p) : p;
    return planPrompt(ctx, tokens, params, params.prompts.length > 1 ? `prompt[${i}]` : "prompt");
  });
  const spell: Spell = (t) => tokenString(ctx.tokenizer, t, params.tokensAsIds);
  const decode = (t: number) => ctx.tokenizer.decode([t]);
  const echoScores = params.echo && params.logprobs;
  const k = Math.max(params.promptLogprobs ?? 0, echoScores ? params.topLogprobs : 0);
  const scored =
    params.promptLogprobs !== null || echoScores
      ? scorePrompts(
          ctx,
          planned.map((p) => p.tokens),
          k,
        )
      : null;
  const promptLogprobs =
    params.promptLogprobs !== null && scored
      ? planned.map((p, i) => promptLogprobRow(p.tokens, scored[i]!, params.promptLogprobs!, decode))
      : null;
  const echoes = params.echo
    ? planned.map((p, i) =>
        echoPrompt(ctx, params.prompts[i]!, p.tokens, echoScores ? scored![i]! : null, params.topLogprobs, spell),
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
                logprobs: params.logprobs
                  ? completionLogprobs(d.tokenStrings, d.logprobs, d.textOffsets, d.tops, spell)
                  : null,
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
      const echo = echoes?.[Math.floor(c.index / params.n)];
      const shift = echo?.text.length ?? 0;
      return {
        index: c.index,
        text: (echo?.text ?? "") + c.text,
        logprobs: params.logprobs
          ? completionLogprobs(
              [...(echo?.tokenStrings ?? []), ...c.tokenStrings],
              [...(echo?.logprobs ?? []), ...c.logprobs],
              [...(echo?.offsets ?? []), ...c.textOffsets.map((o) => o + shift)],
              [...(echo?.tops ?? []), ...c.tops],
              spell,
            )
          : null,
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
