// POST /v1/chat/completions: the messages are rendered with the model's own chat template (the
// same renderer rollouts use, so message content can never forge special tokens), then sampled
// like a completion. The assistant text excludes the end-of-turn token; max_tokens defaults to the
// rest of the context, as in vLLM. Logprobs are the trainer's (temperature-processed).
import { ChatRenderer } from "../model/render.ts";
import { InvalidRequestError } from "./errors.ts";
import type { ServeContext } from "./choice.ts";
import { Fields } from "./fields.ts";
import { checkCapacity, planPrompt, servedVersion, startChoices } from "./generation.ts";
import { checkModelName } from "./models.ts";
import { chatLogprobs, nowSeconds, requestId, usage } from "./openai.ts";
import { chatParams } from "./params.ts";
import { sseResponse } from "./sse.ts";

const renderers = new WeakMap<ServeContext, ChatRenderer>();

function renderer(ctx: ServeContext): ChatRenderer {
  let r = renderers.get(ctx);
  if (!r) {
    if (!ctx.tokenizer.chatTemplate)
      throw new InvalidRequestError("this model has no chat template; use /v1/completions", "messages", {
        fix: "add chat_template to the model's tokenizer_config.json",
      });
    r = new ChatRenderer(ctx.tokenizer);
    renderers.set(ctx, r);
  }
  return r;
}

export async function handleChat(ctx: ServeContext, request: Request): Promise<Response> {
  const params = chatParams(Fields.parse(await request.text()), ctx.engine.vocabSize);
  checkModelName(ctx, params.model);
  if (params.promptLogprobs)
    throw new InvalidRequestError(
      "prompt_logprobs is not supported on chat completions in rlx serve; use /v1/completions",
      "prompt_logprobs",
    );
  let tokens: number[];
  try {
    tokens = renderer(ctx).render(params.messages, {
      addGenerationPrompt: params.addGenerationPrompt,
      templateArgs: params.templateArgs,
    }).tokenIds;
  } catch (err) {
    if (err instanceof InvalidRequestError) throw err;
    throw new InvalidRequestError(`the chat template failed on these messages: ${(err as Error).message}`, "messages");
  }
  const planned = [planPrompt(ctx, tokens, params, "messages")];
  const abort = new AbortController();
  request.signal.addEventListener("abort", () => abort.abort(), { once: true });
  const id = requestId("chatcmpl");
  const created = nowSeconds();
  const model = ctx.modelName;
  const chunk = (choice: Record<string, unknown>, version: number) => ({
    id,
    object: "chat.completion.chunk",
    created,
    model,
    choices: [choice],
    policy_version: version,
  });

  if (params.stream) {
    checkCapacity(ctx, planned.length * params.n);
    return sseResponse(
      async (send) => {
        for (let index = 0; index < params.n; index++)
          send(
            chunk(
              { index, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null },
              ctx.engine.version,
            ),
          );
        let completionTokens = 0;
        const choices = await startChoices(ctx, planned, params, abort, (d) => {
          completionTokens += d.tokens.length;
          const delta = d.text === "" && d.finishReason !== null ? {} : { content: d.text };
          send(
            chunk(
              {
                index: d.index,
                delta,
                logprobs: params.logprobs ? chatLogprobs(d.tokenStrings, d.logprobs) : null,
                finish_reason: d.finishReason,
                stop_reason: d.stopReason,
              },
              d.version,
            ),
          );
        });
        if (params.includeUsage)
          send({
            id,
            object: "chat.completion.chunk",
            created,
            model,
            choices: [],
            usage: usage(tokens.length, completionTokens),
            policy_version: servedVersion(choices, ctx.engine.version),
          });
      },
      () => abort.abort(),
    );
  }

  const choices = await startChoices(ctx, planned, params, abort);
  return Response.json({
    id,
    object: "chat.completion",
    created,
    model,
    choices: choices.map((c) => ({
      index: c.index,
      message: { role: "assistant", content: c.text, tool_calls: [] },
      logprobs: params.logprobs ? chatLogprobs(c.tokenStrings, c.logprobs) : null,
      finish_reason: c.finishReason,
      stop_reason: c.stopReason,
      ...(params.returnTokenIds ? { token_ids: c.tokens } : {}),
      policy_version: c.version,
    })),
    usage: usage(
      tokens.length,
      choices.reduce((sum, c) => sum + c.tokens.length, 0),
    ),
    prompt_logprobs: null,
    ...(params.returnTokenIds ? { prompt_token_ids: tokens } : {}),
    system_fingerprint: null,
    policy_version: servedVersion(choices, ctx.engine.version),
  });
}
