// Cores where the work is: a trainer and one policy engine computing on the same machine's CPU
// cores hand the cores to whichever of them has work. Each says when it is busy in a 2-byte file
// that both map (the trainer byte 0, the generator byte 1), and before each unit of work (a
// trainer micro-batch or optimizer step, a generator admit-and-decode round) it takes all the
// cores when the other is idle and its share when both are busy, so the two never run more
// threads than there are cores.
//
// Why: with no split the two processes' OpenMP teams oversubscribe the cores whenever both
// compute, and a parallel region then waits for its descheduled threads (docs/architecture.md,
// "Measured facts": a 2-thread step beside another busy process ran several times slower); with a
// fixed split an idle trainer's cores could not generate. Measured on 2 cores (experiments/bench_history.md,
// "The three-env RL step"): 1.00-1.06x the unsplit threads, 1.14x once generation got faster (the
// CPU inference kernels), since passive OpenMP waits already let an idle process's cores go to the
// other; what the split buys is that the two never oversubscribe by construction. The parent
// (`rlx train`, launch.ts) creates the file and hands its path to the children in RLX_CORE_SHARE;
// rlx.h's rlx_set_threads does the switch, between two native calls, on the thread that makes
// them.
import { existsSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { RlxError } from "../errors.ts";
import { check, native } from "./ffi.ts";

export const CORE_SHARE_ENV = "RLX_CORE_SHARE";

export type CoreRole = "trainer" | "generator";
const BYTE: Record<CoreRole, number> = { trainer: 0, generator: 1 };

/** Threads each role gets while both are busy: the trainer half the cores (rounded up), the
 * generator the rest, at least one each. */
export function sharedThreads(cores: number): Record<CoreRole, number> {
  const trainer = Math.max(1, Math.ceil(cores / 2));
  return { trainer, generator: Math.max(1, cores - trainer) };
}

export class CoreShare {
  readonly role: CoreRole;
  readonly cores: number;
  /** Rounds run on the share (the other busy) and on all cores: what the split did. */
  readonly rounds = { shared: 0, whole: 0 };
  readonly #flags: Uint8Array;
  #threads = 0;

  private constructor(flags: Uint8Array, role: CoreRole, cores: number) {
    this.#flags = flags;
    this.role = role;
    this.cores = cores;
  }

  /** The file a run's children share (both flags clear), made by the parent. */
  static create(path: string): string {
    writeFileSync(path, new Uint8Array(2));
    return path;
  }

  /** One role's side of a file create() made. */
  static open(path: string, role: CoreRole, cores = cpus().length): CoreShare {
    return new CoreShare(Bun.mmap(path, { shared: true }), role, cores);
  }

  /** This process's side of the file the parent named in RLX_CORE_SHARE; undefined without one. */
  static fromEnv(role: CoreRole): CoreShare | undefined {
    const path = process.env[CORE_SHARE_ENV];
    if (!path) return undefined;
    if (!existsSync(path))
      throw new RlxError(`${CORE_SHARE_ENV}=${path}: no such file`, {
        fix: `unset ${CORE_SHARE_ENV}: rlx train sets it for the processes it starts`,
      });
    return CoreShare.open(path, role);
  }

  /** Marks this role busy or idle for the other to see. */
  busy(on: boolean): void {
    this.#flags[BYTE[this.role]] = on ? 1 : 0;
  }

  /** Sets this process's threads for the next unit of work: all cores while the other is idle;
   * returns them. */
  apply(): number {
    const other: CoreRole = this.role === "trainer" ? "generator" : "trainer";
    const shared = this.#flags[BYTE[other]] === 1;
    const threads = shared ? sharedThreads(this.cores)[this.role] : this.cores;
    if (shared) this.rounds.shared++;
    else this.rounds.whole++;
    if (threads === this.#threads) return threads;
    const lib = native();
    check(lib, lib.rlx_set_threads(threads));
    this.#threads = threads;
    return threads;
  }
}
