// `rlx launch slurm CONFIG --nodes N`: writes the sbatch script of one run as one Slurm job
// (src/processes/slurm_script.ts says which process runs where), prints it (--dry-run, writing
// nothing) or submits it (--submit, printing the job id). The run directory is the config's
// output_dir, made absolute, and must be on a filesystem every node sees: /tmp is refused.
import { mkdirSync, writeFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { defineCommand } from "citty";
import { loadConfig } from "../config/load.ts";
import { ConfigError, RlxError } from "../errors.ts";
import { repeated } from "./run.ts";

/** Node-local paths: each node would see its own run directory. */
const LOCAL_ROOTS = ["/tmp", "/var/tmp", "/dev/shm", "/run"];

function positive(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^[1-9]\d*$/.test(text)) throw new ConfigError(`--${flag} ${text}: expected a positive integer`);
  return Number(text);
}

const slurm = defineCommand({
  meta: {
    name: "slurm",
    description:
      "Write the sbatch script of a run: trainer ranks as srun tasks (one per GPU, or per node on CPU), the orchestrator and its policy servers once on the first node (docs/scaling.md). Without --dry-run or --submit it writes OUTPUT_DIR.slurm/launch.sbatch",
  },
  args: {
    config: {
      type: "positional",
      required: true,
      description: "Run config (TOML); its output_dir is the run directory",
    },
    nodes: { type: "string", required: true, description: "Nodes of the job" },
    "gpus-per-node": {
      type: "string",
      description: "GPUs per node, one trainer rank each (trainer.device cuda); omit on CPU",
    },
    partition: { type: "string", description: "Slurm partition (#SBATCH --partition)" },
    time: { type: "string", description: "Time limit, e.g. 04:00:00 (#SBATCH --time)" },
    set: {
      type: "string",
      description: "Override a config key, as for rlx train (repeatable); the script passes it on",
    },
    "master-port": {
      type: "string",
      description: "Port of rank 0's store on the first node (default: trainer.dist.master_port, else 29500)",
    },
    "dry-run": { type: "boolean", description: "Print the script; writes nothing" },
    submit: { type: "boolean", description: "Write the script and run sbatch on it; prints the job id" },
  },
  async run({ args, rawArgs }) {
    const { policyNote, slurmScript, slurmLogRoot } = await import("../processes/slurm_script.ts");
    const { selfCommand } = await import("../processes/children.ts");
    if (args["dry-run"] && args.submit) throw new ConfigError("--dry-run and --submit: choose one");
    const nodes = positive("nodes", args.nodes)!;
    const gpus = positive("gpus-per-node", args["gpus-per-node"]);
    const flagPort = positive("master-port", args["master-port"]);
    const configPath = resolve(args.config);
    const overrides = repeated(rawArgs, "--set");
    const { config } = loadConfig(configPath, overrides);
    const configuredPort = config.trainer.dist.master_port;
    if (flagPort && configuredPort && flagPort !== configuredPort)
      throw new ConfigError(`--master-port ${flagPort} but trainer.dist.master_port = ${configuredPort}`, {
        fix: "give one of them (the ranks refuse a MASTER_PORT that differs from trainer.dist.master_port)",
      });
    const masterPort = flagPort ?? (configuredPort || 29500);
    const onGpu = config.trainer.device.startsWith("cuda");
    if (gpus && config.trainer.device !== "cuda")
      throw new ConfigError(`--gpus-per-node ${gpus} but trainer.device is ${config.trainer.device}`, {
        fix: 'set trainer.device = "cuda": each rank then takes cuda:SLURM_LOCALID (a "cuda:N" would put every rank of a node on GPU N)',
      });
    if (!gpus && onGpu)
      throw new ConfigError(`trainer.device is ${config.trainer.device} but --gpus-per-node is not given`, {
        fix: "pass --gpus-per-node G: one trainer rank per GPU",
      });
    const runDir = resolve(config.output_dir);
    const local = LOCAL_ROOTS.find((root) => runDir === root || runDir.startsWith(`${root}/`));
    if (local)
      throw new ConfigError(`output_dir ${runDir} is under ${local}, which every node has its own of`, {
        fix: "set output_dir to a shared filesystem (NFS, Lustre, GPFS) every node mounts at the same path",
      });
    if (/\s/.test(runDir))
      throw new ConfigError(`output_dir "${runDir}" holds whitespace, which #SBATCH --output cannot`, {
        fix: "set output_dir to a path without spaces",
      });
    const script = slurmScript({
      rlx: selfCommand(),
      commandLine: ["rlx", "launch", "slurm", ...rawArgs].join(" "),
      config: configPath,
      overrides,
      runDir,
      nodes,
      ...(gpus ? { gpusPerNode: gpus } : {}),
      ...(args.partition ? { partition: args.partition } : {}),
      ...(args.time ? { time: args.time } : {}),
      jobName: `rlx-${basename(runDir)}`,
      policy: policyNote(config.inference),
      masterPort,
    });
    if (args["dry-run"]) {
      process.stdout.write(script);
      return;
    }
    const logRoot = slurmLogRoot(runDir);
    mkdirSync(logRoot, { recursive: true }); // sbatch --output needs its folder to exist
    const path = join(logRoot, "launch.sbatch");
    writeFileSync(path, script, { mode: 0o755 });
    if (!args.submit) {
      console.log(`wrote ${path}\nsubmit it with: sbatch ${path}`);
      return;
    }
    if (!Bun.which("sbatch"))
      throw new RlxError("sbatch is not on PATH: this machine cannot submit Slurm jobs", {
        fix: `run on a Slurm login node, or copy ${path} there and run sbatch on it`,
      });
    const proc = Bun.spawnSync(["sbatch", "--parsable", path], { stdout: "pipe", stderr: "pipe" });
    if (proc.exitCode !== 0)
      throw new RlxError(`sbatch ${path} failed (exit ${proc.exitCode}): ${proc.stderr.toString().trim()}`, {
        fix: "check that this machine reaches the Slurm controller (sinfo) and the #SBATCH lines (partition, time, GPUs), then run sbatch on the script",
      });
    const jobId = proc.stdout.toString().trim().split(";")[0];
    console.log(`submitted job ${jobId}: ${path}; logs in ${logRoot}/job-${jobId}`);
  },
});

export default defineCommand({
  meta: { name: "launch", description: "Run a config on a cluster: write (and submit) its job script" },
  subCommands: { slurm },
});
