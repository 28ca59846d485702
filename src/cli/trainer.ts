// `rlx trainer`: the trainer process of a run (src/trainer/process.ts). Internal: `rlx train`
// starts it with the run directory, whose config.resolved.toml is its whole configuration, so
// the trainer and the orchestrator cannot disagree about a setting. With trainer.world_size > 1 it
// starts one per rank, each with --rank and the same --store. A rank on another node is started by
// hand the same way (its store then read from trainer.dist), or by a launcher: torchrun's and
// Slurm's variables place it (src/processes/launch_env.ts, docs/scaling.md).
import { join } from "node:path";
import { defineCommand } from "citty";
import { loadConfig } from "../config/load.ts";
import { ConfigError } from "../errors.ts";
import { latestCheckpoint } from "../rundir/checkpoint.ts";

/** --resume: the checkpoint `rlx train --resume` picks (it has already rewound the run to it). */
function newestCheckpoint(runDir: string, resumeFrom: string | undefined): string {
  if (resumeFrom) throw new ConfigError("--resume and --resume-from: choose one");
  const latest = latestCheckpoint(runDir, (message) => console.warn(`warning: ${message}`));
  if (!latest)
    throw new ConfigError(`--resume: ${runDir} has no whole checkpoint to continue from`, {
      fix: "start the ranks without --resume (a fresh run), or with --resume-from DIR",
    });
  return latest.dir;
}

export default defineCommand({
  meta: {
    name: "trainer",
    description: "Internal: the trainer process `rlx train` starts (reads RUN_DIR/config.resolved.toml)",
  },
  args: {
    "run-dir": { type: "string", required: true, description: "The run directory (output_dir of the run)" },
    "resume-from": { type: "string", description: "Checkpoint directory to restore weights and optimizer state from" },
    resume: {
      type: "boolean",
      description:
        "Restore the newest whole checkpoint of --run-dir, the one `rlx train --resume` continues from (a launcher's job script run again)",
    },
    "parent-pid": { type: "string", description: "Exit when this process is gone" },
    rank: {
      type: "string",
      description: "Data-parallel rank, 0..trainer.world_size-1 (default: RANK or SLURM_PROCID, else 0)",
    },
    store: {
      type: "string",
      description:
        "Where the ranks meet: tcp://HOST:PORT or file:///PATH (default: MASTER_ADDR or the first host of SLURM_JOB_NODELIST, at MASTER_PORT or trainer.dist.master_port; else trainer.dist's master_addr:master_port)",
    },
  },
  async run({ args }) {
    const { runTrainer } = await import("../trainer/process.ts");
    const { configuredStore } = await import("../processes/trainer_ranks.ts");
    const { resolveTrainerPlace } = await import("../processes/launch_env.ts");
    const runDir = args["run-dir"];
    const resumeFrom = args.resume ? newestCheckpoint(runDir, args["resume-from"]) : args["resume-from"];
    const { config } = loadConfig(join(runDir, "config.resolved.toml"));
    const place = resolveTrainerPlace(
      process.env,
      {
        ...(args.rank !== undefined ? { rank: args.rank } : {}),
        ...(args.store ? { store: args.store } : {}),
        startedByTrain: args["parent-pid"] !== undefined,
      },
      config.trainer,
    );
    const distributed = config.trainer.world_size > 1;
    await runTrainer({
      runDir,
      // the launcher's local rank may pick the GPU (trainer.device "cuda" -> cuda:LOCAL_RANK)
      config: { ...config, trainer: { ...config.trainer, device: place.device } },
      ...(resumeFrom ? { resumeFrom } : {}),
      ...(args["parent-pid"] ? { parentPid: Number(args["parent-pid"]) } : {}),
      rank: place.rank,
      ...(distributed ? { store: place.store ?? configuredStore(config) } : {}),
    });
  },
});
