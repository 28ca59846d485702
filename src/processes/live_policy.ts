// The live policy as the orchestrator sees it: a sampling client that tracks the newest weights,
// plus `load(dir, version)` to move it to a published step. Two implementations behind one
// interface, so the loop does not care where inference runs:
//
//   RemotePolicy     policy servers (spawned `rlx serve --policy`, or external ones named in
//                    [inference] base_urls: rlx serve, vLLM or SGLang); load = the engine's own
//                    way to reload a published step (src/clients/policy_engines.ts).
//   InProcessPolicy  the model in the orchestrator's own process (src/engine/local.ts, the same
//                    batching engine `rlx serve` runs). Used when no server is spawned (tests, or
//                    `--inference in-process`). Each decode step blocks the event loop while it
//                    runs (bun:ffi is synchronous), but the engine yields between steps; the
//                    trainer is a separate process either way, so training overlaps rollouts.
// How either one is started is policy_start.ts.
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { ReloadMode } from "../engine/engine_api.ts";
import { type PolicyEngine, versionStamped } from "../clients/policy_engines.ts";
import { LocalClient } from "../engine/local.ts";
import type { SamplingClient } from "../clients/types.ts";
import type { CoreShare } from "../native/core_share.ts";
import { type ChannelPlan, WeightReceiver } from "../native/weights.ts";
import { RlxError } from "../errors.ts";

export interface LivePolicy {
  readonly client: SamplingClient;
  /** The weights version the policy serves now (0 = the base model). */
  readonly version: number;
  /** Serves the model directory `dir` as `version` from now on. */
  load(dir: string, version: number): Promise<void>;
  /** weight_transfer = "c10d": joins the run's weight channels (weight_channels.ts); returns at once. */
  joinChannels(plan: ChannelPlan): Promise<void>;
  /** Receives `version` over the weight channels and serves it from now on. */
  receive(version: number): Promise<void>;
  close(): Promise<void>;
}

export class RemotePolicy implements LivePolicy {
  readonly client: SamplingClient;
  version: number;

  constructor(
    private readonly engine: PolicyEngine,
    version: number,
  ) {
    this.version = version;
    this.client = engine.reportsVersion ? engine.client : versionStamped(engine.client, () => this.version);
  }

  async load(dir: string, version: number): Promise<void> {
    // vLLM and SGLang load full weights: a LoRA step's merged/ (src/config/resolve.ts requires it for them)
    const merged = join(dir, "merged");
    await this.engine.publish(this.engine.kind !== "rlx" && existsSync(merged) ? merged : dir, version);
    this.version = version;
  }

  async joinChannels(plan: ChannelPlan): Promise<void> {
    if (!this.engine.joinChannels) throw new RlxError(`a ${this.engine.kind} policy has no weight channels`);
    await this.engine.joinChannels(plan);
  }

  async receive(version: number): Promise<void> {
    if (!this.engine.receive) throw new RlxError(`a ${this.engine.kind} policy has no weight channels`);
    await this.engine.receive(version);
    this.version = version;
  }

  async close(): Promise<void> {}
}

/** The policy in this process: src/engine/local.ts's LocalClient over the batching engine. */
export class InProcessPolicy implements LivePolicy {
  private receiver: WeightReceiver | undefined;
  private constructor(readonly client: LocalClient) {}

  /** `maxModelLen` bounds prompt + completion tokens (the run's seq_len). */
  static async create(
    modelDir: string,
    version: number,
    options: {
      maxBatch: number;
      maxModelLen: number;
      kvTokens?: number;
      reloadMode?: ReloadMode;
      prefixCaching?: boolean;
      coreShare?: CoreShare;
      dtype?: "f32" | "bf16";
      device?: string;
      schedule?: { path: string; model: string };
    },
  ): Promise<InProcessPolicy> {
    return new InProcessPolicy(await LocalClient.fromModelDir(modelDir, { ...options, version }));
  }

  get version(): number {
    return this.client.version;
  }

  load(dir: string, version: number): Promise<void> {
    return this.client.updateWeights(dir, version);
  }

  async joinChannels(plan: ChannelPlan): Promise<void> {
    this.receiver = await WeightReceiver.open({
      host: plan.host,
      port: plan.ports[0]!,
      backend: plan.backend,
      timeoutMs: plan.timeoutMs,
      ...(plan.lora ? { lora: plan.lora } : {}),
    });
  }

  receive(version: number): Promise<void> {
    if (!this.receiver) return Promise.reject(new RlxError("the in-process policy joined no weight channel"));
    return this.client.engine.receiveWeights(this.receiver, version);
  }

  async close(): Promise<void> {
    await this.client.close();
    this.receiver?.close();
  }
}
