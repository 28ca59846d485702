// The trainer's side of inference.weight_transfer = "c10d" (docs/engines.md, "Weights in memory"):
// rank 0 opens the run's weight channels (src/processes/weight_channels.ts), serving each one's
// store and waiting until its policy process has joined, and after every step sends the new
// weights, converted to model.dtype, on all of them at once (src/native/weights.ts): with LoRA only
// the adapters, with transfer_delta = "tensors" only the tensors that changed. On a model sharded
// "full" the other ranks take part in the gathers, one parameter at a time.
//
// A channel that fails names its policy process and stops the trainer: the run then stops with the
// error, or restarts from its newest checkpoint under ckpt.max_restarts, whose rendezvous opens
// fresh channels. (A c10d group cannot shrink, so going on without a server would need the
// orchestrator to stop routing to it as well; that is not built.)
import type { ResolvedConfig } from "../config/resolve.ts";
import { RlxError } from "../errors.ts";
import { ProcessGroup } from "../native/dist.ts";
import type { NativeModel } from "../native/model.ts";
import { sendWeights } from "../native/weights.ts";
import { readChannelPlan } from "../processes/weight_channels.ts";

export class WeightChannels {
  private constructor(private readonly groups: ProcessGroup[]) {}

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
    return new WeightChannels(groups);
  }

  /** Sends step `step`'s weights on every channel; throws naming each policy process that failed. */
  send(model: NativeModel, config: ResolvedConfig, step: number): { seconds: number; bytes: number } {
    const start = performance.now();
    const result = sendWeights(model, this.groups, {
      dtype: config.model.dtype,
      version: step,
      changedOnly: config.inference.transfer_delta === "tensors",
    });
    if (result.failed.length > 0)
      throw new RlxError(
        `the weights of step ${step} did not reach policy process${result.failed.length > 1 ? "es" : ""} ${result.failed.join(", ")}: ${result.error}`,
        {
          fix: "the run stops here (or restarts from its newest checkpoint under ckpt.max_restarts); see that process's log for why it stopped receiving",
        },
      );
    return { seconds: (performance.now() - start) / 1000, bytes: result.bytes };
  }

  close(): void {
    for (const g of this.groups) g.free();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** A rank other than 0 of a model sharded "full": its part in rank 0's gathers of a send. */
export function followSend(model: NativeModel, config: ResolvedConfig): void {
  if (config.trainer.shard === "full") sendWeights(model, [], { dtype: config.model.dtype, version: 0 });
}
