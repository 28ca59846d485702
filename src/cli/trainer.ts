// `rlx trainer`: the trainer process of a run (src/trainer/process.ts). Internal: `rlx train`
// starts it with the run directory, whose config.resolved.toml is its whole configuration, so
// the trainer and the orchestrator cannot disagree about a setting. With trainer.world_size > 1 it
// starts one per rank, each with --rank and the same --store; a rank on another node is started
// by hand the same way (docs/scaling.md), its store then read from trainer.dist.
import { join } from "node:path";
import { defineCommand } from "citty";
import { loadConfig } from "../config/load.ts";
import { ConfigError } from "../errors.ts";

export default defineCommand({
  meta: {
    name: "trainer",
    description: "Internal: the trainer process `rlx train` starts (reads RUN_DIR/config.resolved.toml)",
  },
  args: {
    "run-dir": { type: "string", required: true, description: "The run directory (output_dir of the run)" },
    "resume-from": { type: "string", description: "Checkpoint directory to restore weights and optimizer state from" },
    "parent-pid": { type: "string", description: "Exit when this process is gone" },
    rank: { type: "string", description: "Data-parallel rank, 0..trainer.world_size-1 (default 0)" },
    store: {
      type: "string",
      description:
        "Where the ranks meet: tcp://HOST:PORT or file:///PATH (default: trainer.dist's master_addr:master_port)",
    },
  },
  async run({ args }) {
    const { runTrainer } = await import("../trainer/process.ts");
    const { configuredStore, parseStore } = await import("../processes/trainer_ranks.ts");
    const runDir = args["run-dir"];
    const { config } = loadConfig(join(runDir, "config.resolved.toml"));
    const rank = args.rank === undefined ? 0 : Number(args.rank);
    if (!Number.isInteger(rank) || rank < 0)
      throw new ConfigError(`--rank ${args.rank}: expected a rank 0..${config.trainer.world_size - 1}`);
    const distributed = config.trainer.world_size > 1;
    await runTrainer({
      runDir,
      config,
      ...(args["resume-from"] ? { resumeFrom: args["resume-from"] } : {}),
      ...(args["parent-pid"] ? { parentPid: Number(args["parent-pid"]) } : {}),
      rank,
      ...(distributed ? { store: args.store ? parseStore(args.store) : configuredStore(config) } : {}),
    });
  },
});
