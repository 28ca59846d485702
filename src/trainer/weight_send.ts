// The trainer's side of inference.weight_transfer = "c10d" (docs/engines.md, "Weights in memory"):
// rank 0 opens the run's weight channels (src/processes/weight_channels.ts), serving each one's
// store and waiting until its policy process has joined, and after every step sends the new
// weights, converted to model.dtype, on all of them at once (src/native/weights.ts): with LoRA only
// the adapters, with transfer_delta = "tensors" only the tensors that changed. On a model sharded
// "full" the other ranks take part in the gathers, one parameter at a time.
//
// A channel that fails names its policy process and stops the trainer: the run then stops with the
// error, or restarts from its newest checkpoint under ckpt.max_restarts, whose rendezvous opens
// fresh channels. With inference.lost_server = "continue" the trainer instead drops that channel
// and goes on sending on the others (a c10d group cannot shrink: one channel per server is what
// makes this possible); the orchestrator drops the server on its side when its update fails.
import type { ResolvedConfig } from "../config/resolve.ts";
import { RlxError } from "../errors.ts";
import { ProcessGroup } from "../native/dist.ts";
import type { NativeModel } from "../native/model.ts";
import { sendWeights } from "../native/weights.ts";
import { readChannelPlan } from "../processes/weight_channels.ts";

export class WeightChannels {
  /** The working channels, each with its policy process's index. */
  private constructor(private groups: { group: ProcessGroup; policy: number }[]) {}

  /** Rank 0: opens every channel of the run's plan; returns once each policy process has joined. */
  static async open(runDir: string, log: (line: string) => void): Promise<WeightChannels> {
    const plan = readChannelPlan(runDir);
    const groups: ProcessGroup[] = [];
    const start = performance.now();
    try {
      for (const [i, port] of plan.ports.entries()) {
        groups.push(
          await ProcessGroup.create({
            rank: 0,
            worldSize: 2,
            store: { type: "tcp", host: plan.host, port },
            backend: plan.backend,
            timeoutMs: plan.timeoutMs,
          }).catch((err: Error) => {
            throw new RlxError(
              `policy process ${i} did not join its weight channel tcp://${plan.host}:${port} within ${plan.timeoutMs / 1000} s: ${err.message}`,
              { fix: "see logs/policy-*.log (or the rlx train log for an in-process policy) for why it did not start" },
            );
          }),
        );
      }
    } catch (err) {
      for (const g of groups) g.free();
      throw err;
    }
    log(
      `trainer: ${groups.length} weight channel${groups.length === 1 ? "" : "s"} joined (${plan.backend}) in ${((performance.now() - start) / 1000).toFixed(2)}s`,
    );
    return new WeightChannels(groups.map((group, policy) => ({ group, policy })));
  }

  /**
   * Sends step `step`'s weights on every channel. A failed channel stops the trainer naming its
   * policy process, or with lost_server = "continue" is dropped (logged) while any channel is left.
   */
  send(
    model: NativeModel,
    config: ResolvedConfig,
    step: number,
    log: (line: string) => void,
  ): { seconds: number; bytes: number } {
    const start = performance.now();
    const result = sendWeights(
      model,
      this.groups.map((c) => c.group),
      { dtype: config.model.dtype, version: step, changedOnly: config.inference.transfer_delta === "tensors" },
    );
    if (result.failed.length > 0) {
      const lost = result.failed.map((i) => this.groups[i]!);
      const names = lost.map((c) => c.policy).join(", ");
      const what = `the weights of step ${step} did not reach policy process${lost.length > 1 ? "es" : ""} ${names}: ${result.error}`;
      if (config.inference.lost_server !== "continue" || lost.length === this.groups.length)
        throw new RlxError(what, {
          fix: "the run stops here (or restarts from its newest checkpoint under ckpt.max_restarts); see that process's log for why it stopped receiving",
        });
      for (const c of lost) c.group.free();
      this.groups = this.groups.filter((c) => !lost.includes(c));
      log(`trainer: ${what}; going on without it (inference.lost_server = "continue"), ${this.groups.length} left`);
    }
    return { seconds: (performance.now() - start) / 1000, bytes: result.bytes };
  }

  close(): void {
    for (const c of this.groups) c.group.free();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** A rank other than 0 of a model sharded "full": its part in rank 0's gathers of a send. */
export function followSend(model: NativeModel, config: ResolvedConfig): void {
  if (config.trainer.shard === "full") sendWeights(model, [], { dtype: config.model.dtype, version: 0 });
}
