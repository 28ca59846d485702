// `rlx train --max-restarts N` (`ckpt.max_restarts`): when a child of the run dies (a trainer
// rank, a policy server: a ChildError from src/processes/children.ts), the whole run is stopped
// and started again in this process, resuming from its newest whole checkpoint exactly as
// `rlx train --resume` does (runTraining with `resumeIfAny`, src/orchestrator/run.ts), so the
// resume guarantees hold: no step is trained twice, no task skipped or repeated
// (docs/run-directory.md, "Checkpoints and resume"). A run with no checkpoint yet starts over
// (its logs/ kept); one that began with --resume-from starts from that checkpoint again. Only a
// run whose every rank `rlx train` starts can restart: ranks a launcher started are its to restart.
//
// Each restart waits `ckpt.restart_backoff_s`, doubling, at most MAX_BACKOFF_S; every restart
// counts, one that dies before its first step too. Each is said on the console and appended to
// `logs/restarts.jsonl` (RestartRecord). Past N restarts the run stops with the last error.
// Any other error (a bad config, a full disk, a damaged file) stops the run at once: starting
// again would meet it again.
import { appendFileSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { loadConfig } from "../config/load.ts";
import { ConfigError } from "../errors.ts";
import { ChildError } from "../processes/children.ts";
import { localRanks } from "../processes/trainer_ranks.ts";
import { latestCheckpoint } from "../rundir/checkpoint.ts";
import { runTraining, type TrainOptions, type TrainResult } from "./run.ts";

/** The longest wait before a restart, however many came before it. */
export const MAX_BACKOFF_S = 300;

/** One line of `logs/restarts.jsonl`: a restart, and the death that caused it. */
export interface RestartRecord {
  /** 1 for the first restart. */
  restart: number;
  max_restarts: number;
  /** ISO time the child's death was seen. */
  time: string;
  /** The child that died (e.g. "trainer-1"), how ("was killed by SIGKILL"), what it printed last. */
  child: string;
  exit: string;
  last_lines: string;
  /** The checkpoint step the run continues after; 0 = it starts over. */
  resume_step: number;
  backoff_s: number;
}

/** Seconds before restart `n` (1-based): `first`, doubling, at most MAX_BACKOFF_S. */
export function backoffSeconds(n: number, first: number): number {
  return Math.min(first * 2 ** (n - 1), MAX_BACKOFF_S);
}

/** runTraining, restarted from the newest checkpoint after a child dies, up to `ckpt.max_restarts` times. */
export async function trainWithRestarts(o: TrainOptions): Promise<TrainResult> {
  const { config } = loadConfig(o.configPath, o.overrides);
  const { max_restarts: maxRestarts, restart_backoff_s: firstBackoff } = config.ckpt;
  const runDir = resolve(config.output_dir);
  const started = localRanks(config).length;
  if (maxRestarts > 0 && started < config.trainer.world_size)
    throw new ConfigError(
      `ckpt.max_restarts = ${maxRestarts}, but rlx train starts ${started} of the ${config.trainer.world_size} trainer ranks (trainer.dist.launcher, local_ranks): it cannot restart the others`,
      {
        fix: "set ckpt.max_restarts = 0 and restart the whole job instead (the script `rlx launch slurm` writes continues a run when run again: --requeue)",
      },
    );
  let attempt: TrainOptions = o;
  for (let restart = 1; ; restart++) {
    try {
      return await runTraining(attempt);
    } catch (err) {
      if (!(err instanceof ChildError) || restart > maxRestarts) throw err;
      const latest = latestCheckpoint(runDir, o.warn);
      attempt = { ...o, resume: false, resumeIfAny: true, force: false };
      const record: RestartRecord = {
        restart,
        max_restarts: maxRestarts,
        time: new Date().toISOString(),
        child: err.child.name,
        exit: err.child.exit,
        last_lines: err.child.lastLines,
        resume_step: latest?.step ?? 0,
        backoff_s: backoffSeconds(restart, firstBackoff),
      };
      mkdirSync(join(runDir, "logs"), { recursive: true });
      appendFileSync(join(runDir, "logs", "restarts.jsonl"), `${JSON.stringify(record)}\n`);
      const from = latest ? `the checkpoint of step ${latest.step}` : o.resumeFrom ? o.resumeFrom : "the start";
      o.warn(
        `restart ${restart} of ${maxRestarts} in ${record.backoff_s} s, from ${from}: ${err.message}\n  (${err.fix})`,
      );
      await Bun.sleep(record.backoff_s * 1000);
    }
  }
}
