// JSON over HTTP with the robustness every endpoint call in rlx needs: a timeout per attempt,
// retries with exponential backoff on connection errors, 5xx and 429 (never on other 4xx: a bad
// request stays bad), and a concurrency limit per endpoint. Errors name the endpoint, the status
// and the body, so "the teacher is down" reads as such.
import { EndpointError } from "../errors.ts";

export interface HttpOptions {
  /** Per attempt. */
  timeoutMs: number;
  /** Attempts after the first. */
  retries: number;
  /** First backoff; doubles per retry (with jitter), capped at 10 s. */
  backoffMs: number;
  /** Requests in flight to this endpoint at once. */
  concurrency: number;
  headers?: Record<string, string>;
}

export const DEFAULT_HTTP: HttpOptions = { timeoutMs: 600_000, retries: 5, backoffMs: 250, concurrency: 256 };

/** A counting semaphore: at most `limit` holders at once, FIFO. */
export class Semaphore {
  private waiting: (() => void)[] = [];
  private held = 0;
  constructor(private readonly limit: number) {}
  async run<T>(fn: () => Promise<T>): Promise<T> {
    const release = await this.acquire();
    try {
      return await fn();
    } finally {
      release();
    }
  }

  /** Waits for a slot; the returned call frees it (once). */
  async acquire(): Promise<() => void> {
    if (this.held >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.held++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.held--;
    };
  }
}

const retryable = (status: number) => status === 429 || status >= 500;

export class JsonEndpoint {
  private readonly gate: Semaphore;
  constructor(
    readonly url: string,
    readonly options: HttpOptions = DEFAULT_HTTP,
  ) {
    this.gate = new Semaphore(options.concurrency);
  }

  /** POST (or GET when body is undefined) `path` and return the parsed JSON response. `signal`
   * cancels it, retries included (a judge's reward timeout, src/clients/gate.ts). */
  request<T>(path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    return this.gate.run(() => this.attempt<T>(path, body, signal));
  }

  private async attempt<T>(path: string, body: unknown, signal?: AbortSignal): Promise<T> {
    const target = `${this.url}${path}`;
    let lastError = "";
    for (let attempt = 0; attempt <= this.options.retries; attempt++) {
      signal?.throwIfAborted();
      if (attempt > 0)
        await Bun.sleep(Math.min(10_000, this.options.backoffMs * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2));
      let response: Response;
      let text: string;
      try {
        response = await fetch(target, {
          method: body === undefined ? "GET" : "POST",
          headers: { "content-type": "application/json", ...this.options.headers },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: signal
            ? AbortSignal.any([signal, AbortSignal.timeout(this.options.timeoutMs)])
            : AbortSignal.timeout(this.options.timeoutMs),
        });
        text = await response.text(); // a server that dies mid-answer fails here: the same failure
      } catch (err) {
        signal?.throwIfAborted();
        const e = err as Error;
        lastError =
          e.name === "TimeoutError"
            ? `no answer within ${this.options.timeoutMs} ms`
            : `connection failed: ${e.message}`;
        continue;
      }
      if (response.ok) {
        try {
          return JSON.parse(text) as T;
        } catch {
          throw new EndpointError(
            `${target}: status ${response.status} but the body is not JSON: ${text.slice(0, 200)}`,
          );
        }
      }
      lastError = `status ${response.status}: ${text.slice(0, 500)}`;
      if (!retryable(response.status)) throw new EndpointError(`${target}: ${lastError}`);
    }
    throw new EndpointError(`${target}: gave up after ${this.options.retries + 1} attempts; last: ${lastError}`, {
      fix: "check that the server is running (GET /health) and reachable from this machine",
    });
  }
}
