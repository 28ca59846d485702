// POST /v1/chat/completions: the messages and tools are rendered with the model's own chat
// template (the same renderer rollouts use, so message content can never forge special tokens),
// then sampled like a completion. The assistant text excludes the end-of-turn token and is split
// into content, reasoning_content and tool_calls (chat_stream.ts), streaming or not; max_tokens
// defaults to the rest of the context, as in vLLM. Logprobs are the trainer's (temperature-processed),
// top_logprobs the N most likely tokens of the same distribution.
import { ChatRenderer } from "../model/render.ts";
import type { ChatInputs } from "./chat_request.ts";
import { type AssistantDelta, AssistantStream, splitAssistant } from "./chat_stream.ts";
import { InvalidRequestError } from "../engine/errors.ts";
import { type ServeContext, tokenString } from "./choice.ts";
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

/** The prompt's token ids: the messages and tools rendered by the model's template (also /tokenize). */
export function renderChat(ctx: ServeContext, inputs: ChatInputs): number[] {
  const chat = renderer(ctx);
  try {
    return chat.render(inputs.messages, {
      tools: inputs.tools,
      addGenerationPrompt: inputs.addGenerationPrompt,
      templateArgs: inputs.templateArgs,
    }).tokenIds;
  } catch (err) {
    throw new InvalidRequestError(`the chat template failed on these messages: ${(err as Error).message}`, "messages");
  }
}

/** A finished choice's message: content, reasoning_content (when the model thought), tool_calls. */
function assistantMessage(text: string, parseToolCalls: boolean): Record<string, unknown> {
  const { content, reasoning_content, tool_calls } = splitAssistant(text, parseToolCalls);
  return {
    role: "assistant",
    content: tool_calls.length > 0 && content.trim() === "" ? null : content,
    ...(reasoning_content ? { reasoning_content } : {}),
    tool_calls,
  };
}

/** "tool_calls" when a choice that stopped by itself called tools, as vLLM reports it. */
function finishReason(reason: string | null, called: boolean): string | null {
  return reason === "stop" && called ? "tool_calls" : reason;
}

function mergeDeltas(a: AssistantDelta, b: AssistantDelta): AssistantDelta {
  const out: AssistantDelta = {};
  for (const field of ["content", "reasoning_content"] as const) {
    const text = (a[field] ?? "") + (b[field] ?? "");
    if (text) out[field] = text;
  }
  const calls = [...(a.tool_calls ?? []), ...(b.tool_calls ?? [])];
  if (calls.length > 0) out.tool_calls = calls;
  return out;
}

export async function handleChat(ctx: ServeContext, request: Request): Promise<Response> {
  const params = chatParams(Fields.parse(await request.text()), ctx.engine.vocabSize, ctx.engine.maxLogprobs);
  const spell = (t: number) => tokenString(ctx.tokenizer, t, params.tokensAsIds);
  checkModelName(ctx, params.model);
  if (params.promptLogprobs)
    throw new InvalidRequestError(
      "prompt_logprobs is not supported on chat completions in rlx serve; use /v1/completions",
      "prompt_logprobs",
    );
  const tokens = renderChat(ctx, params);
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
        const streams = Array.from({ length: params.n }, () => new AssistantStream(params.parseToolCalls));
        const called = new Set<number>();
        const choices = await startChoices(ctx, planned, params, abort, (d) => {
          completionTokens += d.tokens.length;
          const stream = streams[d.index]!;
          const delta = mergeDeltas(stream.push(d.text), d.finishReason !== null ? stream.finish() : {});
          if (delta.tool_calls) called.add(d.index);
          send(
            chunk(
              {
                index: d.index,
                delta,
                logprobs: params.logprobs ? chatLogprobs(d.tokenStrings, d.logprobs, d.tops, spell) : null,
                finish_reason: finishReason(d.finishReason, called.has(d.index)),
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
      message: assistantMessage(c.text, params.parseToolCalls),
      logprobs: params.logprobs ? chatLogprobs(c.tokenStrings, c.logprobs, c.tops, spell) : null,
      finish_reason: finishReason(c.finishReason, splitAssistant(c.text, params.parseToolCalls).tool_calls.length > 0),
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
