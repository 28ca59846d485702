// One request inside the batching engine (src/engine/engine.ts): what it asked for, the tokens
// and logprobs it has so far, the weights versions that produced them, and the promise its caller
// waits on. The engine schedules jobs; a job only records and settles, exactly once.
import type { FinishReason, SamplingParams, TopLogprobs } from "../native/generate.ts";
import type { EngineFinish, EngineRequest, EngineResult } from "./engine_api.ts";

export class Job {
  readonly tokens: number[] = [];
  readonly logprobs: number[] = [];
  readonly tops: TopLogprobs[] = [];
  /** The generator slot while running; -1 while queued. */
  slot = -1;
  /** The weights version at admission, and the one that produced the last token. */
  version: number;
  versionEnd: number;
  #settle: (result: EngineResult | Error) => void;
  #detach = () => {};

  constructor(
    readonly request: EngineRequest,
    /** The request's sampling with its seed fixed (unseeded requests must not all share seed 0). */
    readonly sampling: SamplingParams,
    version: number,
    resolve: (result: EngineResult) => void,
    reject: (err: Error) => void,
  ) {
    this.version = this.versionEnd = version;
    this.#settle = (result) => {
      this.#settle = () => {};
      this.#detach();
      if (result instanceof Error) reject(result);
      else resolve(result);
    };
  }

  /** How many alternatives each token carries (0: none). */
  get wantsTop(): number {
    return this.request.topLogprobs ?? 0;
  }

  /** Calls `cancel` when the request's signal aborts (until the job settles). */
  onAbort(cancel: () => void): void {
    const signal = this.request.signal;
    if (!signal) return;
    signal.addEventListener("abort", cancel, { once: true });
    this.#detach = () => signal.removeEventListener("abort", cancel);
  }

  /** Admitted into `slot` under weights `version`. */
  admit(slot: number, version: number): void {
    this.slot = slot;
    this.version = this.versionEnd = version;
  }

  /**
   * Records one token produced by weights `version`; returns whether the consumer asked to stop
   * there (onToken returned true), or "threw" when it threw (a closed stream: its own request ends).
   */
  record(
    token: number,
    logprob: number,
    finish: FinishReason | null,
    version: number,
    top?: TopLogprobs,
  ): boolean | "threw" {
    this.tokens.push(token);
    this.logprobs.push(logprob);
    if (top) this.tops.push(top);
    this.versionEnd = version;
    try {
      return this.request.onToken?.(token, logprob, finish, top) === true;
    } catch {
      return "threw";
    }
  }

  finish(finish: EngineFinish): void {
    const { tokens, logprobs, version, versionEnd } = this;
    const top = this.wantsTop > 0 ? { topLogprobs: this.tops } : {};
    this.#settle({ tokens, logprobs, ...top, finish, version, versionEnd });
  }

  fail(err: Error): void {
    this.#settle(err);
  }
}
