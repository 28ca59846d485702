// How `rlx train` starts its compute children: the trainer ranks it runs on this machine
// (`rlx trainer --rank R`), the c10d store they meet at, and the intra-op threads each child gets.
//
// Why the threads are split here: every child is a separate libtorch process with its own OpenMP
// pool, and they compute at the same time (rollouts of step N+1 overlap training of step N). On
// one machine, more busy threads than cores is very costly (docs/scaling.md: a 2-thread step next
// to another busy process runs several times slower), so when a run has more than one trainer
// rank or more than one policy process, each child gets `cores / (local ranks + policy
// processes)` threads, at least 1. A run with one trainer and at most one policy process is left
// exactly as it was (the trainer gets trainer.threads, or one thread per core), and when both
// compute on this machine's CPU they hand the cores over (trainer.share_cores,
// src/native/core_share.ts): whichever is busy alone takes all the cores, and both busy split them.
//
// Why the parent picks the store: a FileStore must be a path no earlier launch used (c10d reads
// stale keys), and a TCPStore on a free port must be the same port for every rank; the parent
// decides once and hands the same spec to every rank on its command line.
import { mkdirSync, rmSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import type { ResolvedConfig } from "../config/resolve.ts";
import { ConfigError } from "../errors.ts";
import { CORE_SHARE_ENV, CoreShare } from "../native/core_share.ts";
import type { StoreSpec } from "../native/dist.ts";
import type { ChildSpec } from "./children.ts";
import { policyDevice } from "./policy_start.ts";

export interface LaunchOptions {
  runDir: string;
  /** The checkpoint every rank restores (--resume). */
  resumeFrom?: string;
  /** Policy processes computing beside the trainers on this machine: spawned servers, 1 in-process, 0 external. */
  policyProcesses: number;
  cores?: number;
}

export interface Launch {
  /** One spec per trainer rank started here. */
  trainers: ChildSpec[];
  /** RLX_THREADS for each spawned policy server; undefined = the server's default (one per core). */
  serverThreads?: number;
  /** The file the trainer and the one policy process hand the cores over in (both on this CPU). */
  coreShare?: string;
  /** The rendezvous every rank was given (world_size > 1). */
  store?: StoreSpec;
}

/** The ranks `rlx train` starts here: none when a launcher starts them, trainer.dist.local_ranks, or all. */
export function localRanks(config: ResolvedConfig): number[] {
  const { world_size: world, dist } = config.trainer;
  if (dist.launcher === "external") return [];
  const ranks = dist.local_ranks.length > 0 ? dist.local_ranks : Array.from({ length: world }, (_, r) => r);
  const bad = ranks.find((r) => r >= world);
  if (bad !== undefined)
    throw new ConfigError(`trainer.dist.local_ranks: rank ${bad} is not below world_size ${world}`, {
      fix: "list ranks 0..world_size-1",
    });
  if (new Set(ranks).size !== ranks.length)
    throw new ConfigError(`trainer.dist.local_ranks lists a rank twice: [${ranks.join(", ")}]`);
  return ranks;
}

/** Intra-op threads per child (see the file header); undefined = leave the child's default. */
export function threadShare(config: ResolvedConfig, ranksHere: number, policyProcesses: number, cores = cpus().length) {
  if (config.deterministic) return { trainer: Math.max(1, config.trainer.threads), server: 1 };
  const own = config.trainer.threads > 0 ? config.trainer.threads : undefined;
  if (config.trainer.world_size === 1 && policyProcesses <= 1) return { trainer: own, server: undefined };
  const share = Math.max(1, Math.floor(cores / Math.max(1, ranksHere + policyProcesses)));
  return { trainer: own ?? share, server: share };
}

/** A port the OS reports free now on `host`. */
export function freePort(host: string): number {
  const listener = Bun.listen({ hostname: host, port: 0, socket: { data() {} } });
  const port = listener.port;
  listener.stop(true);
  return port;
}

/** The store for this launch. Partial local launches (several nodes) need a fixed TCP address. */
function chooseStore(config: ResolvedConfig, runDir: string, allHere: boolean): StoreSpec {
  const dist = config.trainer.dist;
  if (!allHere && (dist.store !== "tcp" || dist.master_port === 0)) {
    throw new ConfigError(
      "trainer.dist.local_ranks starts only some ranks here, so the others need a fixed rendezvous",
      {
        fix: 'set trainer.dist.store = "tcp", master_addr to this node\'s address and a master_port every node can reach',
      },
    );
  }
  if (dist.store === "file") {
    // a fresh name per launch: c10d would read an earlier launch's keys from an old file
    const dir = join(runDir, "c10d");
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    return { type: "file", path: join(dir, `store-${Date.now()}-${process.pid}`) };
  }
  return { type: "tcp", host: dist.master_addr, port: dist.master_port || freePort(dist.master_addr) };
}

/** The command-line form of a store, as `rlx trainer --store` reads it back (parseStore). */
export function storeArg(store: StoreSpec): string {
  return store.type === "tcp" ? `tcp://${store.host}:${store.port}` : `file://${store.path}`;
}

export function parseStore(text: string): StoreSpec {
  const tcp = /^tcp:\/\/(.+):(\d+)$/.exec(text);
  if (tcp) return { type: "tcp", host: tcp[1]!, port: Number(tcp[2]) };
  if (text.startsWith("file://") && text.length > 7) return { type: "file", path: text.slice(7) };
  throw new ConfigError(`--store ${text}: expected tcp://HOST:PORT or file:///PATH`);
}

/** The store a rank started by hand uses: the config's TCP address (docs/scaling.md, several nodes). */
export function configuredStore(config: ResolvedConfig): StoreSpec {
  const dist = config.trainer.dist;
  if (dist.store !== "tcp" || dist.master_port === 0) {
    throw new ConfigError("this trainer rank was given no --store, and the config names no fixed rendezvous", {
      fix: 'rlx train passes --store to the ranks it starts; for a rank started by hand set trainer.dist.store = "tcp" and master_addr/master_port',
    });
  }
  return { type: "tcp", host: dist.master_addr, port: dist.master_port };
}

/** Whether the trainer and the policy hand the cores over: one of each, both on this machine's CPU,
 * more than one core, and nobody fixed the threads (trainer.threads, a deterministic run). */
export function sharesCores(config: ResolvedConfig, policyProcesses: number, cores = cpus().length): boolean {
  return (
    config.trainer.share_cores &&
    !config.deterministic &&
    config.trainer.world_size === 1 &&
    config.trainer.threads === 0 &&
    policyProcesses === 1 &&
    config.trainer.device === "cpu" &&
    policyDevice(config) === "cpu" &&
    cores > 1
  );
}

/** What `rlx train` says about the ranks it started (world_size > 1 or an external launcher). */
export function launchLine(config: ResolvedConfig, launch: Launch): string {
  const world = config.trainer.world_size;
  if (launch.trainers.length === 0)
    return `trainer: all ${world} ranks are started by a launcher (trainer.dist.launcher = "external"), none here`;
  const threads = launch.trainers[0]?.env?.RLX_THREADS ?? "default";
  const store = launch.store?.type === "tcp" ? `${launch.store.host}:${launch.store.port}` : launch.store?.path;
  return `trainer: ${launch.trainers.length} of ${world} ranks started here (${threads} threads each), meeting at ${store}`;
}

/** The trainer children to spawn and the threads of everyone. */
export function planLaunch(config: ResolvedConfig, o: LaunchOptions): Launch {
  const world = config.trainer.world_size;
  const ranks = localRanks(config);
  const threads = threadShare(config, ranks.length, o.policyProcesses, o.cores);
  const env: Record<string, string> = threads.trainer !== undefined ? { RLX_THREADS: String(threads.trainer) } : {};
  const coreShare =
    ranks.length > 0 && sharesCores(config, o.policyProcesses, o.cores)
      ? CoreShare.create(join(o.runDir, "core_share"))
      : undefined;
  if (coreShare) env[CORE_SHARE_ENV] = coreShare;
  const base = [
    "trainer",
    "--run-dir",
    o.runDir,
    "--parent-pid",
    String(process.pid),
    ...(o.resumeFrom ? ["--resume-from", o.resumeFrom] : []),
  ];
  const serverThreads = threads.server;
  // a launcher starts every rank, and they find their store from its variables (launch_env.ts)
  if (ranks.length === 0) return { trainers: [], ...(serverThreads ? { serverThreads } : {}) };
  if (world === 1)
    return {
      trainers: [{ name: "trainer", args: base, env, mayExit: true }],
      ...(serverThreads ? { serverThreads } : {}),
      ...(coreShare ? { coreShare } : {}),
    };
  const store = chooseStore(config, o.runDir, ranks.length === world);
  const trainers = ranks.map((rank) => ({
    name: `trainer-${rank}`,
    describe: `rank ${rank} of ${world}`,
    args: [...base, "--rank", String(rank), "--store", storeArg(store)],
    env,
    mayExit: true,
  }));
  return { trainers, store, ...(serverThreads ? { serverThreads } : {}) };
}
