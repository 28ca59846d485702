// Lagged copies of the live policy: the policy's own weights, taken over only every `every` steps,
// served by the batching engine in the orchestrator's process. OPSD's `teacher_refresh` scores its
// hinted sequences with one, so the self-teacher does not move with each update of the student
// (SDFT, arXiv 2601.19897, keeps an average of the policy's past weights for the same reason).
//
// A copy starts from the weights the policy starts from (the base model, or a resumed
// checkpoint's) and loads a published step once that step is at least `every` steps newer than
// its own: the policy wrapper `following` refreshes the copies after each load of the policy. A
// resumed run's copy starts from the checkpoint's weights, so it can be up to N - 1 steps fresher
// than the killed run's copy was (the copy is not in the checkpoint).
// The weights come from the run's weights/ directory, so a copy needs weight_transfer = "disk"
// (over the weight channels no directory is written). It holds one more model in this process, on
// the policy's device.
import { resolve } from "node:path";
import type { ResolvedConfig } from "../config/resolve.ts";
import { ConfigError } from "../errors.ts";
import type { SamplingClient } from "../clients/types.ts";
import { loadNative } from "../native/ffi.ts";
import { schedulePath } from "../rundir/paths.ts";
import { InProcessPolicy, type LivePolicy } from "./live_policy.ts";
import { policyDevice, policyLimits } from "./policy_start.ts";

export class LaggedCopies {
  /** By period: the copy that takes the policy's weights every that many steps. */
  private readonly copies = new Map<number, Promise<InProcessPolicy>>();

  constructor(
    private readonly config: ResolvedConfig,
    /** The run directory, and the weights the live policy starts from and their version. */
    private readonly start: { runDir: string; modelDir: string; version: number },
  ) {}

  /** The client of the copy that takes the policy's weights every `every` steps (one per period). */
  async client(every: number): Promise<SamplingClient> {
    if (this.config.inference.weight_transfer !== "disk")
      throw new ConfigError(
        `a lagged copy of the policy loads published weights from disk; inference.weight_transfer is "${this.config.inference.weight_transfer}"`,
        { fix: 'set inference.weight_transfer = "disk", or use the live policy (no teacher_refresh)' },
      );
    let copy = this.copies.get(every);
    if (!copy) {
      copy = this.create(every);
      this.copies.set(every, copy);
    }
    return (await copy).client;
  }

  private async create(every: number): Promise<InProcessPolicy> {
    await loadNative(this.config.deterministic ? 1 : Number(process.env.RLX_THREADS ?? 1));
    return InProcessPolicy.create(this.start.modelDir, this.start.version, {
      maxBatch: this.config.inference.max_batch,
      ...policyLimits(this.config, this.start.modelDir),
      prefixCaching: false,
      dtype: this.config.model.dtype,
      device: policyDevice(this.config),
      ...(this.config.inference.record_schedule
        ? {
            schedule: { path: schedulePath(this.start.runDir, `lagged-${every}`), model: resolve(this.start.modelDir) },
          }
        : {}),
    });
  }

  /** After the policy loaded `version` from `dir`: the copies it is `every` steps ahead of take it. */
  async refresh(dir: string, version: number): Promise<void> {
    for (const [every, pending] of this.copies) {
      const policy = await pending;
      if (version - policy.version >= every) await policy.load(dir, version);
    }
  }

  /** The live policy, with each load of it refreshing the copies. */
  following(live: LivePolicy): LivePolicy {
    return {
      client: live.client,
      get version() {
        return live.version;
      },
      load: async (dir, version) => {
        await live.load(dir, version);
        await this.refresh(dir, version);
      },
      joinChannels: (plan) => live.joinChannels(plan),
      receive: (version) => live.receive(version),
      close: async () => {
        await live.close();
        for (const pending of this.copies.values()) await (await pending).close();
      },
    };
  }
}
