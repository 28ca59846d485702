// The schedule record: every call the batching engine (engine.ts) made on its generator, in order,
// one JSON line each, appended to a file of the run directory (RUN/schedule/, docs/run-directory.md
// "Replaying a step"). Timing decides which requests share a prefill, which sequences a decode
// step runs, when a weight swap lands between two steps and how many threads compute; the
// generator's arithmetic and each sequence's sampler (one generator seeded per sequence) follow
// from those calls alone. So replaying the recorded calls on the recorded weights gives back every
// token and logprob (src/replay/rollouts.ts), however the run's timing fell.
//
// Lines (the first is the header, ScheduleHeader):
//   {"a":[request...],"n":k}  generator.add with these requests, of which the first k were admitted;
//                             a request is {"i":id,"tag":..,"p":[prompt],"m":[temperature,top_p,
//                             top_k,max_new_tokens,seed],"stop":[ids]} the first time, {"i":id} after
//   {"s":k}                   k decode steps
//   {"r":id}                  generator.remove of a running request (a stop string, a cancel)
//   {"f":id,"n":tokens}       a request finished with this many tokens (replay checks it)
//   {"v":version,"how":"in-flight"|"drain"|"adapter","dir":..}  weights swapped in
//   {"t":threads}             the intra-op threads changed
//   {"x":1}                   a failed step: the generator was made anew, its sequences failed
import { closeSync, mkdirSync, openSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import type { SamplingParams } from "../native/generate.ts";
import { currentThreads } from "../native/runtime.ts";

export interface ScheduleHeader {
  schedule: 1;
  /** The weights version and directory the engine started with. */
  version: number;
  model: string;
  dtype: string;
  device: string;
  slots: number;
  capacity: number;
  kv_tokens: number;
  prefill_tokens: number;
  prefix_caching: boolean;
  threads: number;
  started: string;
}

export type ReloadHow = "in-flight" | "drain" | "adapter";

/** One request as the generator got it (the engine's job: the same object at every add); `tag` is
 * the caller's name for it (a rollout id). */
export interface ScheduledRequest {
  request: { prompt: readonly number[]; tag?: string };
  sampling: SamplingParams;
}

export class ScheduleRecorder {
  #fd: number;
  #steps = 0;
  #threads: number;
  #nextId = 0;
  #ids = new WeakMap<object, number>();

  /** The record of an engine just made (its limits and starting version in the header). */
  static forEngine(
    engine: {
      model: { dtype: string; device: string };
      version: number;
      maxBatch: number;
      maxModelLen: number;
      kvTokens: number;
      maxPrefillTokens: number;
      prefixCaching: boolean;
    },
    where: { path: string; model: string },
  ): ScheduleRecorder {
    return new ScheduleRecorder(where.path, {
      version: engine.version,
      model: where.model,
      dtype: engine.model.dtype,
      device: engine.model.device,
      slots: engine.maxBatch,
      capacity: engine.maxModelLen,
      kv_tokens: engine.kvTokens,
      prefill_tokens: engine.maxPrefillTokens,
      prefix_caching: engine.prefixCaching,
      threads: currentThreads(),
    });
  }

  constructor(
    readonly path: string,
    header: Omit<ScheduleHeader, "schedule" | "started">,
  ) {
    mkdirSync(dirname(path), { recursive: true });
    this.#fd = openSync(path, "a");
    this.#threads = header.threads;
    this.#write({ schedule: 1, ...header, started: new Date().toISOString() });
  }

  add(requests: readonly ScheduledRequest[], admitted: number): void {
    const entries = requests.map((job) => {
      const known = this.#ids.get(job);
      if (known !== undefined) return { i: known };
      const id = this.#nextId++;
      this.#ids.set(job, id);
      const { request, sampling: s } = job;
      return {
        i: id,
        ...(request.tag === undefined ? {} : { tag: request.tag }),
        p: request.prompt,
        m: [s.temperature ?? 1, s.topP ?? 1, s.topK ?? 0, s.maxNewTokens, s.seed ?? 0],
        ...(s.stopTokenIds?.length ? { stop: s.stopTokenIds } : {}),
      };
    });
    this.#write({ a: entries, n: admitted });
  }

  step(): void {
    this.#steps++;
  }

  remove(job: ScheduledRequest): void {
    this.#write({ r: this.#ids.get(job) });
  }

  finish(job: ScheduledRequest, tokens: number): void {
    const id = this.#ids.get(job);
    if (id !== undefined) this.#write({ f: id, n: tokens });
  }

  reload(version: number, how: ReloadHow, dir?: string): void {
    this.#write({ v: version, how, ...(dir === undefined ? {} : { dir }) });
  }

  threads(threads: number): void {
    if (threads === this.#threads) return;
    this.#threads = threads;
    this.#write({ t: threads });
  }

  reset(): void {
    this.#write({ x: 1 });
  }

  close(): void {
    this.#flushSteps();
    closeSync(this.#fd);
  }

  #flushSteps(): void {
    if (this.#steps === 0) return;
    const line = `{"s":${this.#steps}}\n`;
    this.#steps = 0;
    writeSync(this.#fd, line);
  }

  #write(event: object): void {
    this.#flushSteps();
    writeSync(this.#fd, JSON.stringify(event) + "\n");
  }
}
