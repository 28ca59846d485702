// Errors of the inference side that the HTTP server maps to status codes: a request the engine
// refuses (400, naming the field), a full queue (429: the client backs off and retries), and an
// engine that is shutting down (503). They are RlxErrors so a LocalClient caller sees the same
// message and fix a remote caller reads in the JSON body.
import { RlxError } from "../errors.ts";

/** A request that can never succeed as written; `param` is the API field at fault. */
export class InvalidRequestError extends RlxError {
  readonly param: string | null;
  constructor(message: string, param: string | null, options: { fix?: string } = {}) {
    super(message, options);
    this.param = param;
  }
}

/** The engine's queue is full; retry later (HTTP 429). */
export class QueueFullError extends RlxError {}

/** The engine is draining or closed and takes no new work (HTTP 503). */
export class EngineClosedError extends RlxError {}

/** A request for a model this server does not serve (HTTP 404, as vLLM answers). */
export class ModelNotFoundError extends InvalidRequestError {}
