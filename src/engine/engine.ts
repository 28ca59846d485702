// The batching engine: one model, one NativeGenerator (up to `maxBatch` sequences over a paged K/V
// cache), and a loop that keeps it busy. Everything that generates or scores in-process goes
// through it: the HTTP server (`rlx serve`) and LocalClient.
//
// Why built this way:
//   - Continuous batching. The loop alternates "admit" (prefill queued requests that fit as one
//     batch) and "step" (one decode token for every running sequence), yielding to the event loop
//     between the two: a request that arrives mid-generation joins at the next step, and a
//     finished sequence frees its slot in the step that reports it.
//   - Bounded memory. The K/V cache is a budget of `kvTokens` in blocks taken as positions need
//     them (native/src/kv_cache.h). A request is admitted when a slot is free and its prompt + max
//     tokens fit, else it waits in order; past `maxQueue` waiting, submit throws QueueFullError.
//   - Weight reloads (a directory, or a transfer received over a weight channel while decoding
//     goes on: reloads.ts), whole and validated before the swap. "drain" (rlx serve's default):
//     admission stops, running sequences finish on the old weights, then a fresh generator.
//     "in-flight" (rlx train's default; PipelineRL, Piché et al. 2025): the new model is bound
//     between two decode steps (NativeGenerator.setModel); running sequences keep their K/V and
//     each later token's logprob is the one its sampling weights gave, so importance ratios stay
//     exact per token. A result's `version` is the version at admission (what
//     max_off_policy_steps needs), `versionEnd` that of its last token. A LoRA adapter for the
//     served base is copied into the served model at the same point (docs/lora.md).
//   - Replayable. With `schedule`, every generator call is recorded (schedule.ts): what timing
//     decided, so that `rlx replay --rollouts` regenerates each token exactly.
//   - Cancellation (an AbortSignal, or onToken returning true for a stop string) frees the slot
//     at once; native calls are synchronous, so a cancel can never land inside a step.
import { type CacheStats, type GenToken, NativeGenerator, score, type TopLogprobs } from "../native/generate.ts";
import type { CoreShare } from "../native/core_share.ts";
import { type ScoredTop, scoreTop } from "../native/score_top.ts";
import type { NativeModel } from "../native/model.ts";
import { prefillBatchSize } from "./admission.ts";
import { EngineClosedError } from "./errors.ts";
import {
  type EngineFinish,
  type EngineOptions,
  type EngineRequest,
  type EngineResult,
  type ReloadMode,
} from "./engine_api.ts";
import { Job } from "./job.ts";
import { checkEngineOptions, checkRequest, checkSequences, checkSubmit, checkTopCount, type Limits } from "./limits.ts";
import { channelSource, directorySource, type Fetched, type WeightSource } from "./reloads.ts";
import { ScheduleRecorder } from "./schedule.ts";
import type { WeightReceiver } from "../native/weights.ts";

interface Reload {
  source: WeightSource;
  version: number;
  done: (err?: Error, adapterOnly?: boolean) => void;
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

export class Engine {
  readonly maxBatch: number;
  readonly maxModelLen: number;
  readonly maxQueue: number;
  readonly maxPrefillTokens: number;
  /** The K/V budget in tokens: as asked, in whole blocks (default: every slot's whole sequence). */
  readonly kvTokens: number;
  readonly reloadMode: ReloadMode;
  readonly maxLogprobs: number;
  readonly prefixCaching: boolean;
  #model: NativeModel;
  /** The model the last transfer replaced, kept to receive the next one into (reloads.ts). */
  #retired: NativeModel | undefined;
  #generator: NativeGenerator;
  #version: number;
  #queue: Job[] = [];
  #running = new Map<number, Job>();
  #reloads: Reload[] = [];
  #pumping = false;
  #closed = false;
  #ownsModel: boolean;
  #idle: (() => void)[] = [];
  readonly #loadWeights: (dir: string) => Promise<NativeModel>;
  readonly #adapterSwap: (model: NativeModel, dir: string) => Promise<(() => void) | null>;
  readonly #coreShare: CoreShare | undefined;
  /** Every generator call, for replay (schedule.ts); undefined when not recorded. */
  readonly schedule: ScheduleRecorder | undefined;
  /** Counters for /metrics-style reporting and tests (adapterReloads: reloads that moved only a LoRA adapter). */
  readonly stats = { admitted: 0, steps: 0, generatedTokens: 0, maxRunning: 0, adapterReloads: 0 };

  constructor(model: NativeModel, options: EngineOptions) {
    const { kvTokens, ...checked } = checkEngineOptions(model, options);
    ({ maxBatch: this.maxBatch, maxModelLen: this.maxModelLen, reloadMode: this.reloadMode } = checked);
    this.maxQueue = options.maxQueue ?? 16 * this.maxBatch;
    this.maxPrefillTokens = options.maxPrefillTokens ?? 8192;
    this.maxLogprobs = options.maxLogprobs ?? 20;
    this.#version = options.version ?? 0;
    this.#model = model;
    this.#ownsModel = options.ownsModel ?? true;
    this.prefixCaching = options.prefixCaching ?? true;
    this.#generator = this.#newGenerator(model, kvTokens);
    this.kvTokens = this.#generator.cacheStats().kv.budgetTokens;
    this.#loadWeights =
      options.loadWeights ??
      (async (dir) => (await import("../model/hf.ts")).loadModel(dir, { dtype: model.dtype, device: model.device }));
    this.#adapterSwap = async (served, dir) => (await import("../model/hf.ts")).adapterSwap(served, dir);
    this.#coreShare = options.coreShare;
    this.schedule = options.schedule && ScheduleRecorder.forEngine(this, options.schedule);
  }

  #newGenerator(model: NativeModel, kvTokens = this.kvTokens): NativeGenerator {
    return NativeGenerator.create(model, {
      slots: this.maxBatch,
      capacity: this.maxModelLen,
      kvTokens,
      keepPrefixes: this.prefixCaching,
      prefillTokens: this.maxPrefillTokens,
    });
  }

  get version(): number {
    return this.#version;
  }

  get model(): NativeModel {
    return this.#model;
  }

  get vocabSize(): number {
    return this.#model.config.vocab_size;
  }

  /** Sequences generating now, and requests waiting for a slot. */
  get load(): { running: number; queued: number } {
    return { running: this.#running.size, queued: this.#queue.length };
  }

  /** The generator's prompt and prefix counts (since it was made), and its K/V use now, in tokens. */
  get cacheStats(): CacheStats {
    return this.#generator.cacheStats();
  }

  /** Whether `count` more requests fit in the queue now (for all-or-nothing multi-choice requests). */
  canAccept(count: number): boolean {
    return !this.#closed && this.#queue.length + count <= this.maxQueue;
  }

  /** Checks a request against the engine's limits; throws InvalidRequestError naming the field. */
  validate(prompt: readonly number[], maxNewTokens: number): void {
    checkRequest(prompt, maxNewTokens, this.#limits());
  }

  #limits(): Limits {
    return { vocabSize: this.vocabSize, maxModelLen: this.maxModelLen };
  }

  /** Queues a sequence; resolves when it finishes (or is cancelled). */
  submit(request: EngineRequest): Promise<EngineResult> {
    try {
      const { maxQueue, maxLogprobs } = this;
      const state = { closed: this.#closed, queued: this.#queue.length, running: this.#running.size };
      checkSubmit(request, { ...state, maxQueue, maxLogprobs }, this.#limits());
    } catch (err) {
      return Promise.reject(err);
    }
    // Unseeded requests must not all share seed 0 (they would sample identical tokens).
    const sampling = { ...request.sampling, seed: request.sampling.seed ?? Math.floor(Math.random() * 2 ** 52) };
    return new Promise<EngineResult>((resolve, reject) => {
      const job = new Job(request, sampling, this.#version, resolve, reject);
      if (request.signal?.aborted) return job.finish("abort");
      job.onAbort(() => this.#cancel(job));
      this.#queue.push(job);
      this.#kick();
    });
  }

  /** Prompt logprobs of each sequence under the current weights (element 0 of each is 0). */
  score(sequences: number[][], options: { temperature?: number } = {}): { logprobs: Float32Array[]; version: number } {
    if (this.#closed) throw new EngineClosedError("the inference engine is shutting down");
    checkSequences(sequences, this.#limits());
    if (sequences.length === 0) return { logprobs: [], version: this.#version };
    const { logprobs } = score(this.#model, sequences, { temperature: options.temperature ?? 1 });
    return { logprobs, version: this.#version };
  }

  /**
   * Prompt logprobs with the top-k of every position's distribution at `temperature` (default 1),
   * and each token's rank in it (element 0 of each sequence: no prediction).
   */
  scoreTop(sequences: number[][], k: number, options: { temperature?: number } = {}): ScoredTop[] {
    if (this.#closed) throw new EngineClosedError("the inference engine is shutting down");
    checkSequences(sequences, this.#limits());
    checkTopCount(k, this.maxLogprobs, "prompt_logprobs");
    if (sequences.length === 0) return [];
    return scoreTop(this.#model, sequences, { k, temperature: options.temperature ?? 1 });
  }

  /**
   * Loads new weights. Drain mode: admission pauses, running sequences finish on the old weights,
   * then the model is swapped. In-flight mode: swapped between two decode steps, running
   * sequences continue on the new weights. Resolves once `version` is serving, saying whether only
   * a LoRA adapter moved (adapterOnly).
   */
  reloadWeights(dir: string, version: number): Promise<{ adapterOnly: boolean }> {
    this.#retired?.free(); // kept only while weights come over a channel
    this.#retired = undefined;
    return this.#queueReload(directorySource(dir, this.#loadWeights, this.#adapterSwap), version);
  }

  /**
   * Receives `version` over a weight channel (src/native/weights.ts) and swaps it in as
   * reloadWeights does. The transfer runs on the receiver's thread: decoding goes on meanwhile, and
   * in drain mode admission pauses only once it has arrived.
   */
  receiveWeights(receiver: WeightReceiver, version: number): Promise<void> {
    const retired = () => {
      const model = this.#retired;
      this.#retired = undefined;
      return model;
    };
    const source = channelSource(receiver, () => this.#model, retired, version);
    return this.#queueReload(source, version).then(() => undefined);
  }

  #queueReload(source: WeightSource, version: number): Promise<{ adapterOnly: boolean }> {
    if (this.#closed) return Promise.reject(new EngineClosedError("the inference engine is shutting down"));
    return new Promise((resolve, reject) => {
      this.#reloads.push({
        source,
        version,
        done: (err, adapterOnly = false) => (err ? reject(err) : resolve({ adapterOnly })),
      });
      this.#kick();
    });
  }

  /** Resolves when nothing is queued, running or reloading. */
  idle(): Promise<void> {
    if (!this.#busy()) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Stops taking work, lets queued and running requests finish, then frees the generator and model. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.idle();
    this.#generator.free();
    if (this.#ownsModel) this.#model.free();
    this.#retired?.free();
    this.schedule?.close();
  }

  #busy(): boolean {
    return this.#queue.length > 0 || this.#running.size > 0 || this.#reloads.length > 0;
  }

  #kick(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    // Let the current tick finish first, so requests submitted together are prefilled together.
    setImmediate(() => void this.#pump());
  }

  async #pump(): Promise<void> {
    this.#coreShare?.busy(true);
    try {
      while (this.#busy()) {
        const threads = this.#coreShare?.apply();
        if (threads !== undefined) this.schedule?.threads(threads);
        const next = this.#reloads[0];
        const due = next !== undefined && next.source.ready(); // a transfer: once it arrived
        const canReload = this.reloadMode === "in-flight" || this.#running.size === 0;
        if (due && canReload) await this.#reload();
        else if (!due || this.reloadMode === "in-flight") this.#admit();
        if (this.#running.size > 0) this.#step();
        else if (next && !due && this.#queue.length === 0) await Bun.sleep(1); // only a transfer to wait for
        await yieldToEventLoop();
      }
    } finally {
      this.#coreShare?.busy(false);
      this.#pumping = false;
      for (const resolve of this.#idle.splice(0)) resolve();
    }
  }

  #admit(): void {
    const size = prefillBatchSize(this.#queue, this.maxBatch - this.#running.size, this.maxPrefillTokens);
    if (size === 0) return;
    const batch = this.#queue.splice(0, size);
    let first;
    try {
      first = this.#generator.add(batch.map((job) => ({ prompt: job.request.prompt, sampling: job.sampling })));
    } catch (err) {
      for (const job of batch) job.fail(err as Error);
      return;
    }
    this.schedule?.add(batch, first.length);
    this.#queue.unshift(...batch.slice(first.length)); // what the K/V left cannot hold waits, in order
    this.stats.admitted += first.length;
    first.forEach((t, j) => {
      const job = batch[j]!;
      job.admit(t.slot, this.#version);
      this.#running.set(t.slot, job);
    });
    this.stats.maxRunning = Math.max(this.stats.maxRunning, this.#running.size);
    this.#deliverAll(first);
  }

  #step(): void {
    let produced;
    try {
      produced = this.#generator.step();
    } catch (err) {
      // A failed step leaves the cache in an unknown state: fail everything running, start clean.
      for (const job of this.#running.values()) job.fail(err as Error);
      this.#running.clear();
      this.#generator.free();
      this.#generator = this.#newGenerator(this.#model);
      this.schedule?.reset();
      return;
    }
    this.schedule?.step();
    this.stats.steps += 1;
    this.#deliverAll(produced);
  }

  /** Hands each produced token to its job, with the alternatives the jobs asked for (one shim call). */
  #deliverAll(produced: GenToken[]): void {
    const want = Math.max(0, ...produced.map((t) => this.#running.get(t.slot)?.wantsTop ?? 0));
    const tops = want > 0 ? this.#generator.topLogprobs(produced.length, want) : [];
    produced.forEach((t, j) => this.#deliver(t, tops[j]));
  }

  #deliver(t: GenToken, top: TopLogprobs | undefined): void {
    const job = this.#running.get(t.slot);
    if (!job) return;
    const { token, logprob, finish } = t;
    this.stats.generatedTokens += 1;
    const n = job.wantsTop;
    const own =
      n > 0 && top ? { ids: top.ids.slice(0, n), logprobs: top.logprobs.slice(0, n), rank: top.rank } : undefined;
    const stopHere = job.record(token, logprob, finish, this.#version, own);
    // A consumer that throws (a closed stream) cancels its own request, never the batch.
    if (stopHere === "threw") this.#finish(job, finish === null, "abort");
    else if (finish !== null) this.#finish(job, false, finish);
    else if (stopHere) this.#finish(job, true, "stop");
  }

  #finish(job: Job, removeSlot: boolean, finish: EngineFinish): void {
    if (removeSlot) {
      this.#generator.remove(job.slot);
      this.schedule?.remove(job);
    }
    this.#running.delete(job.slot);
    this.schedule?.finish(job, job.tokens.length);
    job.finish(finish);
  }

  #cancel(job: Job): void {
    const queued = this.#queue.indexOf(job);
    if (queued >= 0) {
      this.#queue.splice(queued, 1);
      job.finish("abort");
    } else if (job.slot >= 0 && this.#running.get(job.slot) === job) {
      this.#finish(job, true, "abort");
    }
  }

  async #reload(): Promise<void> {
    const reload = this.#reloads.shift()!;
    let fetched: Fetched | undefined;
    try {
      fetched = await reload.source.fetch(this.#model);
      // In-flight: this runs between two decode steps, and the cache and sequences stay.
      if ("model" in fetched && this.reloadMode === "in-flight") this.#generator.setModel(fetched.model);
    } catch (err) {
      if (fetched && "model" in fetched) fetched.model.free();
      reload.done(err as Error);
      return;
    }
    if ("swap" in fetched) {
      fetched.swap(); // a LoRA adapter, copied into the served model in place (checked whole first)
      this.#generator.setModel(this.#model); // so no K/V of the old adapter is reused
      this.stats.adapterReloads++;
    } else {
      if (this.reloadMode === "drain") {
        this.#generator.free();
        this.#generator = this.#newGenerator(fetched.model);
      }
      // a transfer's source keeps the replaced model to receive the next one into
      if (this.#ownsModel && fetched.keepReplaced) {
        this.#retired?.free();
        this.#retired = this.#model;
      } else if (this.#ownsModel) this.#model.free();
      this.#model = fetched.model;
      this.#ownsModel = true;
    }
    this.#version = reload.version;
    this.schedule?.reload(reload.version, "swap" in fetched ? "adapter" : this.reloadMode, reload.source.dir);
    reload.done(undefined, "swap" in fetched);
  }
}
