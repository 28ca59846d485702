// rlx serve's HTTP layer on Bun.serve: routes, error mapping, weight reloads and draining. The
// handlers live in their own files (completions.ts, chat.ts); this file only decides which one
// answers and turns every failure into vLLM's JSON error body, so no request can take the
// server down: a bad request is a 4xx naming the field, a bug is a 500, and the next request is
// served as usual.
//
// Routes: GET /health, GET /metrics (the load and the K/V cache; metrics.ts), GET /v1/models, POST /v1/completions, POST /v1/chat/completions,
// POST /tokenize and /detokenize (vLLM's), and on policy servers the weight routes
// (weight_routes.ts): POST /update_weights loads a directory, or receives a transfer over the
// trainer's weight channel (POST /weight_channel), and swaps it in as the engine's reload mode
// says (drain: requests already generating finish on the old weights first; in-flight: between
// two decode steps, they continue on the new weights); every response reports its
// `policy_version` (the version at admission, the oldest that produced any of its tokens).
// With an API key every route but /health answers 401 without it; a policy server's weights
// root bounds what /update_weights may load (403 outside it; auth.ts).
import type { Tokenizer } from "../model/tokenizer.ts";
import { hasApiKey } from "./auth.ts";
import { WeightRoutes } from "./weight_routes.ts";
import { handleChat, renderChat } from "./chat.ts";
import { readChatInputs } from "./chat_request.ts";
import type { ServeContext } from "./choice.ts";
import { handleCompletions } from "./completions.ts";
import type { Engine } from "../engine/engine.ts";
import { EngineClosedError, InvalidRequestError } from "../engine/errors.ts";
import { checkTokenIds, Fields } from "./fields.ts";
import { metricsText } from "./metrics.ts";
import { checkModelName, modelList } from "./models.ts";
import { errorResponse, responseForError } from "./openai.ts";

export interface ServerOptions {
  engine: Engine;
  tokenizer: Tokenizer;
  modelName: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Accept POST /update_weights. */
  policy?: boolean;
  /** Required as `Authorization: Bearer KEY` on every route but /health (auth.ts); none = open. */
  apiKey?: string;
  /** POST /update_weights loads only directories under this one (the run's weights/). */
  weightsRoot?: string;
  /** Called with each unexpected (500) error. */
  onInternalError?: (err: unknown) => void;
}

export interface RunningServer {
  url: string;
  port: number;
  ctx: ServeContext;
  /** Refuses new work (503), finishes what is in flight, then stops listening and frees the model. */
  drain(): Promise<void>;
}

type Handler = (ctx: ServeContext, request: Request) => Promise<Response> | Response;

export function startServer(options: ServerOptions): RunningServer {
  const ctx: ServeContext = { engine: options.engine, tokenizer: options.tokenizer, modelName: options.modelName };
  let draining = false;
  const generating =
    (handler: Handler): Handler =>
    (c, request) => {
      if (draining) throw new EngineClosedError("the server is shutting down");
      return handler(c, request);
    };
  const weights = new WeightRoutes(options.weightsRoot);
  const policyRoute = (handler: Handler) => ({
    method: "POST",
    handler: options.policy
      ? generating(handler)
      : () => errorResponse(404, "this server does not accept weight updates (start rlx serve with --policy)"),
  });
  const routes: Record<string, { method: string; handler: Handler }> = {
    "/health": {
      method: "GET",
      handler: () =>
        draining ? errorResponse(503, "the server is shutting down") : new Response(null, { status: 200 }),
    },
    "/metrics": {
      method: "GET",
      handler: (c) => new Response(metricsText(c.engine), { headers: { "content-type": "text/plain; version=0.0.4" } }),
    },
    "/v1/models": { method: "GET", handler: (c) => Response.json(modelList(c)) },
    "/v1/completions": { method: "POST", handler: generating(handleCompletions) },
    "/v1/chat/completions": { method: "POST", handler: generating(handleChat) },
    "/tokenize": { method: "POST", handler: handleTokenize },
    "/detokenize": { method: "POST", handler: handleDetokenize },
    "/update_weights": policyRoute((c, request) => weights.update(c, request)),
    "/weight_channel": policyRoute((c, request) => weights.joinChannel(c, request)),
  };

  const server = Bun.serve({
    hostname: options.host ?? "127.0.0.1",
    port: options.port ?? 8000,
    idleTimeout: 0,
    async fetch(request) {
      const path = new URL(request.url).pathname.replace(/\/+$/, "") || "/";
      if (path !== "/health" && options.apiKey !== undefined && !hasApiKey(request, options.apiKey))
        return errorResponse(401, "missing or wrong API key: send the header Authorization: Bearer KEY");
      const route = routes[path];
      if (!route) return errorResponse(404, `no route ${path} (rlx serve has ${Object.keys(routes).join(", ")})`);
      if (request.method !== route.method)
        return errorResponse(405, `${path} takes ${route.method}, not ${request.method}`);
      try {
        return await route.handler(ctx, request);
      } catch (err) {
        const response = responseForError(err);
        if (response.status >= 500 && response.status !== 503) options.onInternalError?.(err);
        return response;
      }
    },
  });

  return {
    url: `http://${server.hostname}:${server.port}`,
    port: server.port ?? 0,
    ctx,
    async drain() {
      draining = true;
      await ctx.engine.close();
      weights.close();
      await server.stop(false);
    },
  };
}

async function handleTokenize(ctx: ServeContext, request: Request): Promise<Response> {
  const f = Fields.parse(await request.text());
  checkModelName(ctx, f.string("model"));
  let tokens: number[];
  if (f.has("messages")) {
    // vLLM's chat form: messages (+ tools, add_generation_prompt, chat_template_kwargs), rendered
    // exactly as /v1/chat/completions renders its prompt.
    tokens = renderChat(ctx, readChatInputs(f));
  } else {
    const prompt = f.string("prompt");
    if (prompt === undefined)
      throw new InvalidRequestError("prompt (a string) or messages (a chat) is required", "prompt");
    tokens = ctx.tokenizer.encode(prompt);
  }
  return Response.json({ count: tokens.length, max_model_len: ctx.engine.maxModelLen, tokens });
}

async function handleDetokenize(ctx: ServeContext, request: Request): Promise<Response> {
  const f = Fields.parse(await request.text());
  checkModelName(ctx, f.string("model"));
  const tokens = checkTokenIds(f.raw("tokens") ?? null, "tokens", ctx.engine.vocabSize);
  return Response.json({ prompt: ctx.tokenizer.decode(tokens) });
}
