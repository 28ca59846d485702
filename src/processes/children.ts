// The child processes of `rlx train`: the trainer (`rlx trainer`, one per data-parallel rank) and,
// when spawned, the policy servers (`rlx serve --policy`). All are the same binary as the parent
// (`selfCommand`); src/processes/trainer_ranks.ts says which ones and with how many threads.
//
// Why built this way:
//   - A child that dies while the run needs it fails the run at once, with the child's last log
//     lines in the error (a native crash in the trainer says why, not "timed out"). Of several
//     that die, the first to exit is named: the other trainer ranks only fail after it.
//   - Children run in their own process group (detached), so Ctrl-C reaches only the
//     orchestrator, which then stops them in order (SIGTERM, then SIGKILL after a grace period)
//     instead of racing them to the exit; `failure` does not fire for children being stopped.
//   - `process.on("exit")` kills whatever is still running, so no error path leaves orphans. A
//     SIGKILLed parent cannot run handlers: the children watch their parent's pid themselves.
//   - Output goes to `logs/<name>.log` in the run directory, and the last lines stay in memory.
import { createWriteStream, mkdirSync, type WriteStream } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { RlxError } from "../errors.ts";

/** A child process died while the run needed it: which one, how it ended, what it said last. */
export class ChildError extends RlxError {
  constructor(
    message: string,
    readonly child: { name: string; exit: string; lastLines: string },
    options: { fix: string },
  ) {
    super(message, options);
  }
}

const TAIL_LINES = 30;
/** How long an exited child's last output may take to arrive before its exit is reported. */
const OUTPUT_GRACE_MS = 2000;

/** The command that runs this same rlx: the compiled binary, or bun plus the entry script. */
export function selfCommand(): string[] {
  return Bun.main.startsWith("/$bunfs/") ? [process.execPath] : [process.execPath, Bun.main];
}

export interface ChildSpec {
  name: string;
  /** Arguments after the rlx command, e.g. ["trainer", "--run-dir", dir]. */
  args: string[];
  env?: Record<string, string>;
  /** Exit code 0 is the child's normal end (the trainer after its last step), not a failure. */
  mayExit?: boolean;
  /** Said after the name in errors, e.g. "rank 1 of 2". */
  describe?: string;
  /** A child the run may go on without (a policy server under inference.lost_server = "continue"):
   * called with how it ended instead of failing the run; false fails it after all. */
  survive?: (how: string) => boolean;
}

export class Child {
  readonly tail: string[] = [];
  exitCode: number | null = null;
  signalCode: string | null = null;
  /** Resolves when the child's output is all in its log file (the pipes closed, the file flushed). */
  logged: Promise<void> = Promise.resolve();
  private partial = "";

  constructor(
    readonly name: string,
    readonly proc: Subprocess<"ignore", "pipe", "pipe">,
    private readonly logFile: WriteStream,
  ) {}

  /** Appends output to the log file and the in-memory tail. */
  consume(chunk: Uint8Array): void {
    this.logFile.write(chunk);
    const lines = (this.partial + Buffer.from(chunk).toString("utf8")).split("\n");
    this.partial = lines.pop() ?? "";
    this.tail.push(...lines);
    if (this.tail.length > TAIL_LINES) this.tail.splice(0, this.tail.length - TAIL_LINES);
  }

  lastLines(): string {
    return [...this.tail, this.partial].filter((line) => line.trim()).join("\n");
  }

  get running(): boolean {
    return this.exitCode === null && this.signalCode === null;
  }
}

async function pump(stream: ReadableStream<Uint8Array>, child: Child): Promise<void> {
  for await (const chunk of stream) child.consume(chunk);
}

export class Children {
  private readonly children: Child[] = [];
  private stopping = false;
  /** Exits are reported in the order they happened, so when one trainer rank dies and the others
   * then fail at their next collective, the error names the one that died first. */
  private reports: Promise<void> = Promise.resolve();
  private rejectFailure!: (err: Error) => void;
  /** Rejects with a ChildError when any child exits before stopAll(); never resolves. */
  readonly failure: Promise<never>;
  private readonly killAll = () => {
    for (const child of this.children) if (child.running) child.proc.kill("SIGKILL");
  };

  constructor(private readonly logDir: string) {
    this.failure = new Promise<never>((_, reject) => {
      this.rejectFailure = reject;
    });
    this.failure.catch(() => {}); // observed by whoever races it
    process.on("exit", this.killAll);
  }

  spawn(spec: ChildSpec): Child {
    mkdirSync(this.logDir, { recursive: true });
    const logPath = join(this.logDir, `${spec.name}.log`);
    const logFile = createWriteStream(logPath, { flags: "a" });
    const proc = Bun.spawn([...selfCommand(), ...spec.args], {
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
      detached: true,
      // Passive OpenMP waiting: the children share the cores with each other and with this
      // process, and spinning OpenMP threads make an oversubscribed step 10x slower.
      env: { OMP_WAIT_POLICY: "PASSIVE", ...process.env, ...spec.env },
    });
    const child = new Child(spec.name, proc, logFile);
    this.children.push(child);
    const output = Promise.all([pump(proc.stdout, child), pump(proc.stderr, child)]).catch(() => {});
    child.logged = output.then(() => new Promise<void>((resolve) => logFile.end(resolve)));
    proc.exited.then((code) => {
      child.exitCode = proc.exitCode;
      child.signalCode = proc.signalCode === null ? null : String(proc.signalCode);
      this.reports = this.reports.then(async () => {
        // bounded: a pipe some grandchild still holds must not hold back the other children's reports
        await Promise.race([output, Bun.sleep(OUTPUT_GRACE_MS)]);
        if (this.stopping || (code === 0 && spec.mayExit)) return;
        const how = proc.signalCode ? `was killed by ${proc.signalCode}` : `exited with code ${code}`;
        if (spec.survive?.(how)) return;
        const last = child.lastLines();
        const who = spec.describe ? `the ${spec.name} process (${spec.describe})` : `the ${spec.name} process`;
        this.rejectFailure(
          new ChildError(
            `${who} ${how}${last ? `; its last lines:\n${indent(last)}` : ""}`,
            { name: spec.name, exit: how, lastLines: last },
            { fix: `the whole log is ${logPath}` },
          ),
        );
      });
    });
    return child;
  }

  /** Stops every child: SIGTERM, then SIGKILL after `graceMs`. Children exiting now are not failures. */
  async stopAll(graceMs = 3000): Promise<void> {
    this.stopping = true;
    const running = this.children.filter((child) => child.running);
    for (const child of running) child.proc.kill("SIGTERM");
    const timer = setTimeout(this.killAll, graceMs);
    await Promise.all(running.map((child) => child.proc.exited));
    clearTimeout(timer);
    // what they printed last (a SIGTERM checkpoint's line) reaches their logs before this process exits
    await Promise.race([Promise.all(running.map((child) => child.logged)), Bun.sleep(OUTPUT_GRACE_MS)]);
    process.off("exit", this.killAll);
  }

  get pids(): number[] {
    return this.children.map((child) => child.proc.pid);
  }
}

/**
 * For a child of `rlx train` (RLX_PARENT_PID is in its environment): exits when that process is
 * gone, which is how children end after a SIGKILL of the orchestrator, the one exit it cannot
 * clean up after. For `rlx serve` (rlx train passes it RLX_PARENT_PID); the trainer instead
 * watches its --parent-pid between steps.
 */
export function exitWithParent(pollMs = 500): void {
  const pid = Number(process.env.RLX_PARENT_PID);
  if (!Number.isInteger(pid) || pid <= 0) return;
  const timer = setInterval(() => {
    try {
      process.kill(pid, 0);
    } catch {
      console.error(`rlx: the parent process ${pid} is gone; exiting`);
      process.exit(1);
    }
  }, pollMs);
  timer.unref();
}

function indent(text: string): string {
  return text
    .split("\n")
    .map((line) => `  | ${line}`)
    .join("\n");
}
