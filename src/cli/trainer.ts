// `rlx trainer`: the trainer process of a run (src/trainer/process.ts). Internal: `rlx train`
// starts it with the run directory, whose config.resolved.toml is its whole configuration, so
// the trainer and the orchestrator cannot disagree about a setting. With trainer.world_size > 1 it
// starts one per rank, each with --rank and the same --store. A rank on another node is started by
// hand the same way (its store then read from trainer.dist), or by a launcher: torchrun's and
// Slurm's variables place it (src/processes/launch_env.ts, docs/scaling.md).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { defineCommand } from "citty";
import { loadConfig } from "../config/load.ts";
import { resumePath } from "../rundir/paths.ts";

/**
 * What a rank a launcher started continues from: --resume-from when given, else the checkpoint
 * `rlx train` resumed from (RUN_DIR/resume.json, written before config.resolved.toml), so every
 * rank of a job run again takes the one rlx train chose.
 */
function launchedResume(runDir: string, resumeFrom: string | undefined): string | undefined {
  if (resumeFrom) return resumeFrom;
  const path = resumePath(runDir);
  if (!existsSync(path)) return undefined;
  return (JSON.parse(readFileSync(path, "utf8")) as { checkpoint: string | null }).checkpoint ?? undefined;
}

export default defineCommand({
  meta: {
    name: "trainer",
    description: "Internal: the trainer process `rlx train` starts (reads RUN_DIR/config.resolved.toml)",
  },
  args: {
    "run-dir": { type: "string", required: true, description: "The run directory (output_dir of the run)" },
    "resume-from": {
      type: "string",
      description:
        "Checkpoint directory to restore weights and optimizer state from (default for a rank a launcher started: the one rlx train resumed from, RUN_DIR/resume.json)",
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
    const startedByTrain = args["parent-pid"] !== undefined;
    const resumeFrom = startedByTrain ? args["resume-from"] : launchedResume(runDir, args["resume-from"]);
    const { config } = loadConfig(join(runDir, "config.resolved.toml"));
    const place = resolveTrainerPlace(
      process.env,
      {
        ...(args.rank !== undefined ? { rank: args.rank } : {}),
        ...(args.store ? { store: args.store } : {}),
        startedByTrain,
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
