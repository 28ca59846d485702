// The weight channels of a run with inference.weight_transfer = "c10d" (docs/engines.md, "Weights
// in memory"): one two-rank c10d group per policy process, whose store the trainer's rank 0 serves
// and which the policy process joins (with SGLang as the engine, one update group per server,
// src/native/engine_group.ts). `rlx train` picks the ports once and writes them to the run
// directory (weight_channels.json) before it starts the trainer, so the rank 0 it starts and one a
// launcher starts read the same plan; it then asks each policy process to join its channel.
//
// Where rank 0 is reached: at 127.0.0.1 when rlx train starts it and every policy process is on
// this machine, else at trainer.dist.master_addr (an address the servers reach); on free ports
// when rank 0 runs here, else on master_port + 1, + 2, ... (free ports cannot be picked for
// another machine).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ResolvedConfig } from "../config/resolve.ts";
import { isLoopback } from "../serve/auth.ts";
import { RlxError } from "../errors.ts";
import type { ChannelPlan } from "../native/weights.ts";
import { writeFileAtomic } from "../rundir/paths.ts";
import { policyDevice } from "./policy_start.ts";
import { freePort, localRanks } from "./trainer_ranks.ts";

export const channelPlanPath = (runDir: string) => join(runDir, "weight_channels.json");

/** Picks and writes the channels of `policyProcesses` policy processes; null for weight_transfer = "disk". */
export function planChannels(config: ResolvedConfig, runDir: string, policyProcesses: number): ChannelPlan | null {
  if (config.inference.weight_transfer !== "c10d") return null;
  const dist = config.trainer.dist;
  const rank0Here = localRanks(config).includes(0);
  if (!rank0Here && dist.master_port === 0)
    throw new RlxError('weight_transfer = "c10d" with trainer rank 0 on another machine needs a fixed port', {
      fix: "set trainer.dist.master_port (the channels use the ports after it)",
    });
  // policy servers elsewhere (base_urls) reach rank 0 at master_addr
  const local = config.inference.base_urls.every((url) => isLoopback(new URL(url).hostname));
  const host = rank0Here && local ? "127.0.0.1" : dist.master_addr;
  const ports = Array.from({ length: policyProcesses }, (_, i) =>
    rank0Here ? freePort(host) : dist.master_port + 1 + i,
  );
  const plan: ChannelPlan = {
    host,
    ports,
    // NCCL only when both ends hold their weights on a GPU
    backend: config.trainer.device.startsWith("cuda") && policyDevice(config).startsWith("cuda") ? "nccl" : "gloo",
    timeoutMs: config.inference.transfer_timeout_s * 1000,
    ...(config.inference.engine === "sglang"
      ? {
          engine: {
            kind: "sglang" as const,
            groupNames: ports.map((_, i) => `rlx-weights-${i}`),
            manifest: join(runDir, "weight_manifest.json"),
          },
        }
      : {}),
  };
  const lora = config.model.lora;
  if (lora) plan.lora = { rank: lora.rank, alpha: lora.alpha, targets: lora.targets };
  writeFileAtomic(channelPlanPath(runDir), `${JSON.stringify(plan)}\n`);
  return plan;
}

export function readChannelPlan(runDir: string): ChannelPlan {
  const path = channelPlanPath(runDir);
  if (!existsSync(path))
    throw new RlxError(`${path} is missing: the trainer has no weight channels to send on`, {
      fix: 'start the run with rlx train, which writes it when inference.weight_transfer = "c10d"',
    });
  return JSON.parse(readFileSync(path, "utf8")) as ChannelPlan;
}
