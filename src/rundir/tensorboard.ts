// The TensorBoard tracker: `rlx train` and `rlx sft` write their metrics.jsonl rows as scalars
// (one per numeric key, same step; a row's `time` is the event's wall time) and a few rollouts per
// step as text, into `tensorboard/events.out.tfevents.*` of the run directory ([log] tensorboard,
// on by default); `rlx eval --tensorboard DIR` its eval/<env>/<metric> scalars and replies. `tensorboard --logdir RUN_DIR` shows them; `wandb sync`
// uploads them (docs/run-directory.md). A tracker is never a reason to stop a run: the first
// write that fails is warned about once and the tracker goes quiet.
import { appendFileSync, mkdirSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import type { Rollout } from "../data/types.ts";
import { encodeEvent, type EventValue, tfRecord } from "./tfevents.ts";

export const TENSORBOARD_DIR = "tensorboard";
/** Rollouts shown as text per env and step: the best and the worst. */
const TEXT_PER_ENV = 2;
const TEXT_CHARS = 4000;

export class TensorBoardLog {
  private broken = false;

  private constructor(
    readonly path: string,
    private readonly warn: (line: string) => void,
  ) {}

  /** A new event file under `runDir/tensorboard/` (one per process: a resumed run adds one). */
  static open(runDir: string, warn: (line: string) => void): TensorBoardLog {
    const dir = join(runDir, TENSORBOARD_DIR);
    const name = `events.out.tfevents.${Math.floor(Date.now() / 1000)}.${hostname()}.${process.pid}`;
    const log = new TensorBoardLog(join(dir, name), warn);
    log.guard(() => {
      mkdirSync(dir, { recursive: true });
      appendFileSync(log.path, tfRecord(encodeEvent(Date.now() / 1000, 0, "header")));
    });
    return log;
  }

  /** Every finite number of a metrics row but `step` and `time` as a scalar at `step`. */
  scalars(step: number, row: Record<string, unknown>): void {
    const values: EventValue[] = Object.entries(row)
      .filter(([key, v]) => key !== "step" && key !== "time" && typeof v === "number" && Number.isFinite(v))
      .map(([tag, v]) => ({ tag, scalar: v as number }));
    const wallTime = typeof row.time === "number" ? row.time : Date.now() / 1000;
    this.write(wallTime, step, values);
  }

  /** The best and the worst scored rollout of each env as text, tagged `rollouts/<env>`. */
  rollouts(step: number, rollouts: readonly Rollout[]): void {
    const values: EventValue[] = [];
    for (const env of new Set(rollouts.map((r) => r.env))) {
      const scored = rollouts.filter((r) => r.env === env && !r.error).sort((a, b) => b.reward - a.reward);
      const shown = scored.length > TEXT_PER_ENV ? [scored[0]!, scored.at(-1)!] : scored;
      if (shown.length) values.push({ tag: `rollouts/${env}`, text: shown.map(rolloutMarkdown).join("\n\n---\n\n") });
    }
    this.write(Date.now() / 1000, step, values);
  }

  /** Text summaries (Markdown) at `step`. */
  texts(step: number, texts: ReadonlyArray<{ tag: string; text: string }>): void {
    this.write(Date.now() / 1000, step, [...texts]);
  }

  private write(wallTime: number, step: number, values: EventValue[]): void {
    if (values.length) this.guard(() => appendFileSync(this.path, tfRecord(encodeEvent(wallTime, step, values))));
  }

  private guard(work: () => void): void {
    if (this.broken) return;
    try {
      work();
    } catch (err) {
      this.broken = true;
      this.warn(`tensorboard: cannot write ${this.path} (${(err as Error).message}); the run goes on without it`);
    }
  }
}

/** A rollout as Markdown: its reward and task, then each message in a fenced block. */
export function rolloutMarkdown(rollout: Rollout): string {
  const head = `**reward ${rollout.reward.toFixed(3)}** · task \`${rollout.taskId}\` · policy v${rollout.policyVersion}`;
  const messages = rollout.messages.map((m) => {
    const calls = (m.tool_calls ?? []).map((c) => `\n→ ${c.function.name}(${JSON.stringify(c.function.arguments)})`);
    const body = `${m.content}${calls.join("")}`.slice(0, TEXT_CHARS).replaceAll("```", "'''");
    return `*${m.role}${m.name ? ` (${m.name})` : ""}*\n\n\`\`\`\n${body}\n\`\`\``;
  });
  return [head, ...messages].join("\n\n");
}
