// Where a `rlx trainer` process stands in the run, from its flags and the variables a launcher
// sets: torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, and Slurm's
// SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_NODELIST (docs/scaling.md, "Launching on
// several nodes"). One pure function, so every rule below is a unit test.
//
// Precedence and conflicts:
//   - A rank `rlx train` started (--parent-pid) takes --rank and --store from its parent, which
//     decided them for every rank; launcher variables it inherited are not about it.
//   - Otherwise --rank and --store win over the variables, and one that disagrees with them is a
//     ConfigError naming both: a rank must not silently be two ranks.
//   - torchrun's variables win over Slurm's only when torchrun started this process
//     (TORCHELASTIC_RUN_ID: `srun torchrun ...` leaves Slurm's describing the torchrun agent);
//     otherwise RANK against SLURM_PROCID (or WORLD_SIZE against SLURM_NTASKS) is a conflict.
//   - The launcher's world size must equal trainer.world_size: the orchestrator packs each step
//     for that many ranks. SLURM_NTASKS counts only trainer ranks: the orchestrator and the
//     policy servers run once, outside the trainer tasks.
//   - The store is rank 0's TCPStore at MASTER_ADDR (else the first host of SLURM_JOB_NODELIST)
//     and MASTER_PORT (else trainer.dist.master_port). Under torchrun's static rendezvous
//     (TORCHELASTIC_USE_AGENT_STORE=True) the agent already serves a store on MASTER_PORT, so rank
//     0 serves on trainer.dist.master_port instead, which must then be set.
//   - LOCAL_RANK (else SLURM_LOCALID) picks the GPU: trainer.device "cuda" becomes cuda:LOCAL_RANK,
//     or cuda:0 when CUDA_VISIBLE_DEVICES names one device (the launcher bound one GPU to the
//     task); "cuda:N" and "cpu" are kept as configured.
import { ConfigError } from "../errors.ts";
import type { StoreSpec } from "../native/dist.ts";
import { expandHostlist } from "./hostlist.ts";
import { parseStore, storeArg } from "./trainer_ranks.ts";

export type LaunchVars = Record<string, string | undefined>;

export interface LaunchFlags {
  rank?: string;
  store?: string;
  /** --parent-pid was given: `rlx train` started this rank. */
  startedByTrain: boolean;
}

export interface LaunchConfig {
  world_size: number;
  device: string;
  dist: { master_port: number };
}

export interface TrainerPlace {
  rank: number;
  worldSize: number;
  /** This process's index among the ranks on its node, when a launcher said. */
  localRank?: number;
  /** Where the ranks meet; undefined for one rank. */
  store?: StoreSpec;
  device: string;
  /** Who said so: "flags", "torchrun" or "slurm". */
  source: "flags" | "torchrun" | "slurm";
}

/** A variable as a non-negative integer, or undefined when absent. */
function integer(vars: LaunchVars, name: string): number | undefined {
  const text = vars[name];
  if (text === undefined || text === "") return undefined;
  if (!/^\d+$/.test(text)) throw new ConfigError(`${name}=${text}: expected a non-negative integer`);
  return Number(text);
}

/** Each launcher's view, undefined when it set nothing. */
function launcherView(vars: LaunchVars, kind: "torchrun" | "slurm") {
  const [rank, world, local] =
    kind === "torchrun" ? ["RANK", "WORLD_SIZE", "LOCAL_RANK"] : ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"];
  const view = { rank: integer(vars, rank), world: integer(vars, world), local: integer(vars, local) };
  if (view.rank === undefined && view.world === undefined && view.local === undefined) return undefined;
  return { ...view, names: { rank, world, local } };
}

/** Which launcher speaks for this process (see the header's rules). */
function chooseLauncher(vars: LaunchVars) {
  const torchrun = launcherView(vars, "torchrun");
  const slurm = launcherView(vars, "slurm");
  if (torchrun && slurm && !vars.TORCHELASTIC_RUN_ID) {
    for (const key of ["rank", "world"] as const) {
      if (torchrun[key] !== undefined && slurm[key] !== undefined && torchrun[key] !== slurm[key])
        throw new ConfigError(
          `${torchrun.names[key]}=${torchrun[key]} but ${slurm.names[key]}=${slurm[key]}: torchrun's and Slurm's variables disagree`,
          {
            fix: `unset ${torchrun.names[key]} in the Slurm task (Slurm's variables then place the rank), or start rlx trainer under torchrun`,
          },
        );
    }
  }
  if (torchrun) return { kind: "torchrun" as const, ...torchrun };
  if (slurm) return { kind: "slurm" as const, ...slurm };
  return undefined;
}

/** The store the launcher's variables name, or why there is none. */
function launcherStore(vars: LaunchVars, config: LaunchConfig, kind: "torchrun" | "slurm"): StoreSpec | string {
  const nodelist = vars.SLURM_JOB_NODELIST;
  const host = vars.MASTER_ADDR || (kind === "slurm" && nodelist ? expandHostlist(nodelist)[0] : undefined);
  if (!host)
    return kind === "torchrun" ? "MASTER_ADDR is not set" : "neither MASTER_ADDR nor SLURM_JOB_NODELIST is set";
  const masterPort = integer(vars, "MASTER_PORT");
  const configured = config.dist.master_port;
  if (vars.TORCHELASTIC_USE_AGENT_STORE === "True") {
    if (configured === 0 || configured === masterPort)
      throw new ConfigError(
        `torchrun's agent serves its own store on MASTER_PORT=${masterPort}, and trainer.dist.master_port ${configured === 0 ? "is not set" : "is the same port"}`,
        {
          fix: "set trainer.dist.master_port to another free port on the first node, or run torchrun with --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT (MASTER_PORT is then free for rank 0)",
        },
      );
    return { type: "tcp", host, port: configured };
  }
  if (masterPort !== undefined && configured !== 0 && masterPort !== configured)
    throw new ConfigError(`MASTER_PORT=${masterPort} but trainer.dist.master_port = ${configured}`, {
      fix: "set one of them (trainer.dist.master_port = 0 lets MASTER_PORT decide)",
    });
  const port = masterPort ?? (configured || undefined);
  if (port === undefined) return "neither MASTER_PORT nor trainer.dist.master_port is set";
  return { type: "tcp", host, port };
}

/** The device a rank computes on (see the header's last rule). */
export function rankDevice(device: string, localRank: number | undefined, vars: LaunchVars): string {
  if (device !== "cuda" || localRank === undefined) return device;
  const visible = vars.CUDA_VISIBLE_DEVICES?.split(",").filter((d) => d.trim() !== "");
  if (visible && visible.length === 1) return "cuda:0";
  if (visible && localRank >= visible.length)
    throw new ConfigError(
      `local rank ${localRank} but CUDA_VISIBLE_DEVICES=${vars.CUDA_VISIBLE_DEVICES} names ${visible.length} GPUs`,
      { fix: "start one task per GPU (srun --ntasks-per-node, torchrun --nproc-per-node), or show each task its GPUs" },
    );
  return `cuda:${localRank}`;
}

/** Rank, world, local rank, store and device of this trainer process. */
export function resolveTrainerPlace(vars: LaunchVars, flags: LaunchFlags, config: LaunchConfig): TrainerPlace {
  const world = config.world_size;
  const flagRank = flags.rank === undefined ? undefined : Number(flags.rank);
  if (flagRank !== undefined && (!Number.isInteger(flagRank) || flagRank < 0 || flagRank >= world))
    throw new ConfigError(`--rank ${flags.rank}: expected a rank 0..${world - 1} (trainer.world_size ${world})`);
  const flagStore = flags.store ? parseStore(flags.store) : undefined;
  const launcher = flags.startedByTrain ? undefined : chooseLauncher(vars);
  if (!launcher) {
    const rank = flagRank ?? 0;
    return {
      rank,
      worldSize: world,
      device: config.device,
      source: "flags",
      ...(flagStore ? { store: flagStore } : {}),
    };
  }
  const { kind, names } = launcher;
  if (launcher.world !== undefined && launcher.world !== world)
    throw new ConfigError(
      `${names.world}=${launcher.world} but trainer.world_size = ${world}: the launcher starts ${launcher.world} trainer ranks`,
      {
        fix: `set trainer.world_size = ${launcher.world} (--set on rlx train), or start ${world} tasks; only trainer ranks are tasks`,
      },
    );
  if (launcher.rank !== undefined && launcher.rank >= world)
    throw new ConfigError(`${names.rank}=${launcher.rank} is not below trainer.world_size ${world}`);
  if (flagRank !== undefined && launcher.rank !== undefined && flagRank !== launcher.rank)
    throw new ConfigError(`--rank ${flagRank} but ${names.rank}=${launcher.rank}`, {
      fix: `drop --rank (the launcher numbers the tasks), or unset ${names.rank}`,
    });
  const rank = flagRank ?? launcher.rank ?? 0;
  let store: StoreSpec | undefined = flagStore;
  if (world > 1) {
    const fromVars = launcherStore(vars, config, kind);
    if (flagStore && typeof fromVars !== "string" && storeArg(flagStore) !== storeArg(fromVars))
      throw new ConfigError(`--store ${storeArg(flagStore)} but the ${kind} variables name ${storeArg(fromVars)}`, {
        fix: "drop --store (rank 0 serves the store the variables name), or unset MASTER_ADDR/MASTER_PORT",
      });
    if (!flagStore && typeof fromVars === "string")
      throw new ConfigError(`rank ${rank} of ${world} has no store to meet the others at: ${fromVars}`, {
        fix: "export MASTER_ADDR and MASTER_PORT (torchrun sets both), set trainer.dist.master_port, or pass --store",
      });
    store = flagStore ?? (fromVars as StoreSpec);
  }
  const localRank = launcher.local;
  return {
    rank,
    worldSize: world,
    ...(localRank !== undefined ? { localRank } : {}),
    ...(store ? { store } : {}),
    device: rankDevice(config.device, localRank, vars),
    source: kind,
  };
}
