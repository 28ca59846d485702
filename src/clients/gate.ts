// A gate for calls that leave the process and may be slow or stall: an env's reward (a judge), a
// credit judge's call. At most `concurrency` calls run at once (the rest wait in FIFO order, and the
// wait does not count against the timeout), and each running call gets `timeoutMs`: past it the
// call's AbortSignal fires, its slot is freed and the caller gets a CallTimeout. A call that honours
// the signal (fetch does) stops there; one that ignores it keeps running unobserved, so a reward that
// calls out should pass the signal on. `peak` is the most calls that ever ran at once.
import { Semaphore } from "./http.ts";

/** A call that ran past its gate's timeout. */
export class CallTimeout extends Error {}

export interface GateOptions {
  /** Calls running at once. */
  concurrency: number;
  /** Per call, from the moment it holds a slot; Infinity = none. */
  timeoutMs: number;
}

export class CallGate {
  private readonly slots: Semaphore;
  /** Calls running now. */
  running = 0;
  /** The most calls that ever ran at once. */
  peak = 0;

  constructor(readonly options: GateOptions) {
    if (!(options.concurrency >= 1)) throw new RangeError(`gate concurrency must be >= 1, got ${options.concurrency}`);
    this.slots = new Semaphore(options.concurrency);
  }

  /** Runs `call` in a slot, with a signal that fires at the timeout. */
  run<T>(call: (signal: AbortSignal) => T | Promise<T>): Promise<T> {
    return this.slots.run(async () => {
      this.running++;
      this.peak = Math.max(this.peak, this.running);
      const controller = new AbortController();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, reject) => {
        if (!Number.isFinite(this.options.timeoutMs)) return;
        timer = setTimeout(() => {
          const error = new CallTimeout(`timed out after ${this.options.timeoutMs} ms`);
          controller.abort(error);
          reject(error);
        }, this.options.timeoutMs);
      });
      try {
        return await Promise.race([Promise.resolve().then(() => call(controller.signal)), timeout]);
      } finally {
        clearTimeout(timer);
        this.running--;
      }
    });
  }
}
