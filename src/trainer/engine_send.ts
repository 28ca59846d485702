// The trainer's side of inference.weight_transfer = "c10d" with SGLang as the engine (docs/engines.md,
// "Weights in memory"): rank 0 writes the parameters' names, shapes and dtypes (the order it sends
// in) for the orchestrator, joins each server's update group as rank 0 (serving its store at the
// plan's port; the orchestrator has the server join with POST /init_weights_update_group), and
// after every step broadcasts the parameters, converted to model.dtype, on every group at once,
// while the orchestrator's POST /update_weights_from_distributed has the server receive them.
//
// One group per server, as the channels of rlx's own servers: a server that fails is named and
// the run stops (or restarts from its newest checkpoint under ckpt.max_restarts).
import type { ResolvedConfig } from "../config/resolve.ts";
import { DTYPE_BYTES } from "../data/dtypes.ts";
import { RlxError } from "../errors.ts";
import { EngineGroup, engineBroadcast, engineManifest } from "../native/engine_group.ts";
import type { NativeModel } from "../native/model.ts";
import { runtimeInfo } from "../native/runtime.ts";
import { readChannelPlan } from "../processes/weight_channels.ts";
import { writeFileAtomic } from "../rundir/paths.ts";

export class EngineGroups {
  private constructor(
    private readonly groups: EngineGroup[],
    private readonly urls: string[],
  ) {}

  /** Rank 0: writes the manifest, then joins every server's group; returns once each has joined. */
  static async open(
    runDir: string,
    model: NativeModel,
    config: ResolvedConfig,
    log: (line: string) => void,
  ): Promise<EngineGroups> {
    const plan = readChannelPlan(runDir);
    if (!plan.engine) throw new RlxError(`${runDir}/weight_channels.json names no engine update groups`);
    const { groupNames, manifest } = plan.engine;
    writeFileAtomic(manifest, `${JSON.stringify(engineManifest(model, config.model.dtype))}\n`);
    const urls = config.inference.base_urls;
    const torch = (await runtimeInfo()).torch_version;
    if (torch.startsWith("1."))
      log(
        `trainer: warning: this shim's libtorch ${torch} serves the c10d store protocol from before torch 2, which SGLang's torch 2 ranks do not speak: they cannot join (rlx's own stand-ins can); build the shim against libtorch 2 (docs/engines.md)`,
      );
    const groups: EngineGroup[] = [];
    const start = performance.now();
    try {
      for (const [i, port] of plan.ports.entries()) {
        groups.push(
          await EngineGroup.join({
            backend: plan.backend,
            host: plan.host,
            port,
            rank: 0,
            worldSize: 2,
            groupName: groupNames[i]!,
            timeoutMs: plan.timeoutMs,
          }).catch((err: Error) => {
            throw new RlxError(
              `SGLang server ${urls[i]} did not join its weight update group ${groupNames[i]} at tcp://${plan.host}:${port} within ${plan.timeoutMs / 1000} s: ${err.message}`,
              { fix: "see the rlx train log for the server's answer to POST /init_weights_update_group" },
            );
          }),
        );
      }
    } catch (err) {
      for (const g of groups) g.free();
      throw err;
    }
    log(
      `trainer: ${groups.length} SGLang update group${groups.length === 1 ? "" : "s"} joined (${plan.backend}) in ${((performance.now() - start) / 1000).toFixed(2)}s`,
    );
    return new EngineGroups(groups, urls);
  }

  /** Broadcasts step `step`'s weights on every group; throws naming each server that failed. */
  send(model: NativeModel, config: ResolvedConfig, step: number): { seconds: number; bytes: number } {
    const start = performance.now();
    const result = engineBroadcast(model, this.groups, config.model.dtype);
    if (result.failed.length > 0)
      throw new RlxError(
        `the weights of step ${step} did not reach SGLang server${result.failed.length > 1 ? "s" : ""} ${result.failed.map((i) => this.urls[i]).join(", ")}: ${result.error}`,
        {
          fix: "the run stops here (or restarts from its newest checkpoint under ckpt.max_restarts); the rlx train log has the server's answer to POST /update_weights_from_distributed",
        },
      );
    const elements = model.params().reduce((n, p) => n + p.shape.reduce((a, b) => a * b, 1), 0);
    return { seconds: (performance.now() - start) / 1000, bytes: elements * DTYPE_BYTES[config.model.dtype] };
  }

  close(): void {
    for (const g of this.groups) g.free();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
