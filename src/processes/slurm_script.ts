// The sbatch script `rlx launch slurm` writes: one Slurm job running a whole rlx run. Which process
// runs where (docs/scaling.md, "Launching on several nodes"): the trainer ranks are the job's srun
// tasks, one per GPU (one per node on CPU), each placed by Slurm's variables
// (src/processes/launch_env.ts); the orchestrator, `rlx train` with trainer.dist.launcher =
// "external", runs once in the batch script on the first node and starts no ranks, and the policy
// servers it spawns run there too. The script is meant to be read and edited: comments, and the
// settings as variables at the top.

export interface SlurmJob {
  /** The command that runs rlx (absolute), e.g. ["/opt/rlx/rlx"]. */
  rlx: string[];
  /** How the user ran the generator, quoted in the header. */
  commandLine: string;
  config: string;
  /** --set overrides for rlx train, in order. */
  overrides: string[];
  runDir: string;
  nodes: number;
  /** GPUs per node: one trainer rank each; undefined = CPU, one rank per node. */
  gpusPerNode?: number;
  partition?: string;
  time?: string;
  jobName: string;
  /** Where the policy runs, said in a comment: "spawned on the first node (...)" or "external (...)". */
  policy: string;
  masterPort: number;
}

/** A word as the shell reads it back: bare when safe, else single-quoted. */
export function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/** Where the policy runs, for the script's header: spawned by rlx train, or external servers. */
export function policyNote(inference: { base_urls: string[]; servers: number; device: string }): string {
  if (inference.base_urls.length > 0) return `external, at inference.base_urls (${inference.base_urls.join(", ")})`;
  return `rlx train spawns inference.servers = ${inference.servers} on the first node, on inference.device
#     (${inference.device}; "auto" is trainer.device, so cuda:0 beside rank 0 on GPUs); for a large model,
#     point inference.base_urls at servers of their own`;
}

/** Where the job's logs go: beside the run directory, which `rlx train --force` may delete. */
export function slurmLogRoot(runDir: string): string {
  return `${runDir}.slurm`;
}

export function slurmScript(job: SlurmJob): string {
  const tasks = job.gpusPerNode ?? 1;
  const logRoot = slurmLogRoot(job.runDir);
  const sbatch = [
    `#SBATCH --job-name=${job.jobName}`,
    `#SBATCH --nodes=${job.nodes}`,
    `#SBATCH --ntasks-per-node=${tasks}`,
    ...(job.gpusPerNode ? [`#SBATCH --gpus-per-node=${job.gpusPerNode}`] : []),
    ...(job.partition ? [`#SBATCH --partition=${job.partition}`] : []),
    ...(job.time ? [`#SBATCH --time=${job.time}`] : []),
    `#SBATCH --exclusive`,
    `#SBATCH --requeue`,
    `#SBATCH --output=${logRoot}/job-%j.out`,
  ];
  const perRank = job.gpusPerNode ? "one per GPU" : "one per node (CPU)";
  // output_dir is RUN_DIR, set below: an override of it would only say it twice
  const passedOn = job.overrides.filter((o) => !o.startsWith("output_dir="));
  return `#!/bin/bash
# One rlx run as one Slurm job. Written by \`${job.commandLine}\`;
# edit freely, then \`sbatch THIS_FILE\`.
#
# Which process runs where (docs/scaling.md, "Launching on several nodes"):
#   - The trainer ranks are the job's tasks, ${perRank}, started by srun below. Each
#     \`rlx trainer\` reads SLURM_PROCID (its rank), SLURM_NTASKS (the world size: trainer ranks
#     only), SLURM_LOCALID (its GPU: trainer.device "cuda" becomes cuda:SLURM_LOCALID) and
#     SLURM_JOB_NODELIST (rank 0 serves the store on the first host, at MASTER_PORT).
#   - The orchestrator, \`rlx train\`, runs once, in this script on the first node, with
#     trainer.dist.launcher = "external": it starts no ranks, and meets them through RUN_DIR.
#   - The policy: ${job.policy}.
#
# Restarts: a rank that dies fails the srun step (--kill-on-bad-exit), which stops rlx train and
# fails the job; \`rlx train --max-restarts\` does not apply, since srun, not rlx train, starts the
# ranks. The job is requeueable instead (--requeue: a node failure or a preemption runs this
# script again, as \`scontrol requeue JOBID\` or another sbatch of it does): run again, rlx train
# continues from the run's newest whole checkpoint, or starts it over when it has none
# (--resume-if-any), and every rank takes the checkpoint rlx train chose (RUN_DIR/resume.json).
${sbatch.join("\n")}

set -euo pipefail

# ---- settings ----------------------------------------------------------------------------
RLX=(${job.rlx.map(shellWord).join(" ")})   # rlx, on a path every node sees
CONFIG=${shellWord(job.config)}
RUN_DIR=${shellWord(job.runDir)}   # output_dir: on a filesystem every node sees
RESUME_FROM=""   # another run's checkpoint to start from, e.g. /shared/runs/sft/checkpoints/step_100
NODES=${job.nodes}
TASKS_PER_NODE=${tasks}   # trainer ranks per node
WORLD_SIZE=$((NODES * TASKS_PER_NODE))   # trainer.world_size, set on rlx train below
CPUS_PER_TASK=$((SLURM_CPUS_ON_NODE / TASKS_PER_NODE))
export MASTER_PORT=${job.masterPort}   # rank 0's c10d store, on the first node
# export GLOO_SOCKET_IFNAME=ib0   # the interface CPU (Gloo) ranks talk over
# orchestrator-HOST.log, trainer-HOST-rankR.log; a requeued job's in job-ID-restartN
LOG_DIR=${shellWord(logRoot)}/job-$SLURM_JOB_ID\${SLURM_RESTART_COUNT:+-restart$SLURM_RESTART_COUNT}

mkdir -p "$LOG_DIR"
resume=(--resume-if-any)   # see Restarts above; the run's own checkpoints win over RESUME_FROM
if [ -n "$RESUME_FROM" ]; then resume+=(--resume-from "$RESUME_FROM"); fi

# ---- the orchestrator and the policy servers it spawns: once, on this first node ----------
stamp="$LOG_DIR/started"
touch "$stamp"
sleep 1   # so that the config rlx train writes is newer than the stamp on any filesystem
"\${RLX[@]}" train "$CONFIG" "\${resume[@]}" \\
${passedOn.map((o) => `  --set ${shellWord(o)} \\\n`).join("")}  --set output_dir="$RUN_DIR" \\
  --set trainer.world_size=$WORLD_SIZE \\
  --set trainer.dist.launcher=external \\
  >"$LOG_DIR/orchestrator-$(hostname).log" 2>&1 &
orchestrator=$!

# the ranks read RUN_DIR/config.resolved.toml, which rlx train writes once its checks pass
until [ "$RUN_DIR/config.resolved.toml" -nt "$stamp" ]; do
  if ! kill -0 $orchestrator 2>/dev/null; then
    # exit 0 here: the run had trained its max_steps already (a job run again after its end)
    if wait $orchestrator; then echo "rlx train had nothing to train: see $LOG_DIR"; exit 0; fi
    echo "rlx train stopped before it wrote its config: see $LOG_DIR" >&2
    exit 1
  fi
  sleep 1
done

# ---- the trainer ranks: one srun task each --------------------------------------------------
srun --ntasks=$WORLD_SIZE --ntasks-per-node=$TASKS_PER_NODE --cpus-per-task=$CPUS_PER_TASK \\
  --kill-on-bad-exit=1 --export=ALL,RLX_THREADS=$CPUS_PER_TASK \\
  --output="$LOG_DIR/trainer-%N-rank%t.log" \\
  "\${RLX[@]}" trainer --run-dir "$RUN_DIR" &
ranks=$!

# ---- until one side ends --------------------------------------------------------------------
set +e
while kill -0 $orchestrator 2>/dev/null && kill -0 $ranks 2>/dev/null; do sleep 5; done
if ! kill -0 $ranks 2>/dev/null; then
  # the ranks exit 0 after the last step; a failed rank fails the run
  wait $ranks
  ranks_code=$?
  if [ $ranks_code -ne 0 ]; then
    echo "the trainer ranks failed (srun exit $ranks_code): stopping rlx train; see $LOG_DIR" >&2
    kill -TERM $orchestrator
  fi
  wait $orchestrator
  code=$?
  if [ $ranks_code -ne 0 ]; then code=$ranks_code; fi
else
  wait $orchestrator
  code=$?
  # rlx train is done (or failed): the ranks get a minute to finish the last step, then stop
  if [ $code -ne 0 ]; then kill -TERM $ranks; fi
  for _ in $(seq 60); do kill -0 $ranks 2>/dev/null || break; sleep 1; done
  kill -TERM $ranks 2>/dev/null
  wait $ranks
fi
echo "rlx train exited with code $code; logs in $LOG_DIR"
exit $code
`;
}
