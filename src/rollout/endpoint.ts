// The policy as an OpenAI-compatible endpoint for env-driven episodes (served.ts): one HTTP server per
// process, started on first use, on 127.0.0.1 and a free port. Each episode registers a handler
// under a fresh random key; a request's `Authorization: Bearer <key>` picks the episode, so every
// completion an env asks for is a turn of that episode's rollout and of no other. A key whose
// episode has ended gets 401. Errors have vLLM's error body (src/serve/openai.ts).
import { randomBytes } from "node:crypto";
import { InvalidRequestError } from "../engine/errors.ts";
import { Fields } from "../serve/fields.ts";
import { errorResponse, responseForError } from "../serve/openai.ts";

/** The model name the endpoint lists and accepts (any name is accepted: the key picks the episode). */
export const POLICY_MODEL = "policy";

export type EpisodeHandler = (fields: Fields) => Promise<Record<string, unknown>>;

export interface EpisodeEndpoint {
  /** Ends in /v1. */
  baseUrl: string;
  /** Registers an episode's handler: its key, and a call that retires the key. */
  register(handler: EpisodeHandler): { key: string; release(): void };
}

let started: EpisodeEndpoint | undefined;

/** The process's endpoint, started on the first call. */
export function episodeEndpoint(): EpisodeEndpoint {
  if (started) return started;
  const episodes = new Map<string, EpisodeHandler>();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0, // a completion may take longer than Bun's default 10 s
    async fetch(request) {
      const path = new URL(request.url).pathname;
      if (path === "/v1/models" && request.method === "GET")
        return Response.json({ object: "list", data: [{ id: POLICY_MODEL, object: "model", owned_by: "rlx" }] });
      if (path !== "/v1/chat/completions")
        return errorResponse(404, `${request.method} ${path}: this endpoint serves POST /v1/chat/completions`);
      if (request.method !== "POST") return errorResponse(405, `${path} takes POST`);
      const key = request.headers.get("authorization")?.replace(/^Bearer\s+/i, "") ?? "";
      const handler = episodes.get(key);
      if (!handler)
        return errorResponse(401, "unknown or expired API key: each episode's key is valid while its episode runs");
      try {
        return Response.json(await handler(Fields.parse(await request.text())));
      } catch (err) {
        return responseForError(err);
      }
    },
  });
  server.unref(); // an open endpoint does not keep the process alive
  started = {
    baseUrl: `http://127.0.0.1:${server.port}/v1`,
    register(handler) {
      const key = `rlx-episode-${randomBytes(16).toString("hex")}`;
      episodes.set(key, handler);
      return { key, release: () => void episodes.delete(key) };
    },
  };
  return started;
}

/** A request the episode refuses (400, naming the field). */
export function refuse(message: string, param: string | null = null): never {
  throw new InvalidRequestError(message, param);
}
