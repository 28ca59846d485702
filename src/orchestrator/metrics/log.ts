// What a run reports (docs/architecture.md §10): `metrics.jsonl` (one JSON object per step: `step`, `time` and
// every metric, per-env keys like `reward/math`), one console line per step, a progress bar while
// rollouts are generating, and the summary table at the end.
//
// A step's line joins two halves that are ready at different times: the orchestrator's (rewards,
// errors, staleness, batch shape: known when it cuts batch N) and the trainer's (losses,
// mismatch_kl, entropy, grad norm: known when `weights/step_N/published.json` appears). The
// orchestrator's half travels in the step file and the trainer copies it into the marker, so a
// line is written whole, in step order, when the marker appears, and can be rebuilt from the
// marker alone if the orchestrator was killed before it saw it. Keys are grouped into report sections by their first `/` component
// (src/report/panels.page.js), so names are chosen by family: reward/*, loss/*, mismatch_kl/*,
// entropy/*, throughput/*, time/*, off_policy/*, rollouts/*, metric/*, errors/*, batch/*, optim/*.
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { metricsPath, PUBLISHED_MARKER, type PublishedStep, weightsDir } from "../../rundir/paths.ts";
import { formatTable } from "../../eval/table.ts";
import type { TensorBoardLog } from "../../rundir/tensorboard.ts";

import { mean } from "../../algorithms/group.ts";
import type { Metrics } from "./rollouts.ts";

const RENAMED: Record<string, string> = {
  tokens_per_s: "throughput/train_tokens_per_s",
  seconds: "time/train",
  grad_norm: "optim/grad_norm",
  lr: "optim/lr",
  skipped: "optim/skipped",
  micro_batches: "batch/micro_batches",
  tokens: "batch/train_tokens",
};
const COMPONENTS = [
  ["rl", "rl"],
  ["ce", "ce"],
  ["ref_kl", "ref_kl"],
  ["distill", "distill"],
] as const;

/** The trainer's half of a step's line, from the publish marker. */
export function trainerMetrics(published: PublishedStep): Metrics {
  const out: Metrics = {};
  for (const [key, value] of Object.entries(published.metrics)) out[RENAMED[key] ?? key] = value;
  for (const [env, m] of Object.entries(published.perEnv)) {
    out[`mismatch_kl/${env}`] = m.mismatch_kl ?? 0;
    out[`entropy/${env}`] = m.entropy ?? 0;
    for (const [component] of COMPONENTS)
      if ((m[`count/${component}`] ?? 0) > 0) out[`loss/${component}/${env}`] = m[`loss/${component}`] ?? 0;
  }
  out["time/trainer_wait"] = published.timing.wait;
  out["time/publish"] = published.timing.publish;
  out["time/checkpoint"] = published.timing.checkpoint;
  return out;
}

const num = (v: number | undefined, digits = 3) => {
  if (v === undefined || !Number.isFinite(v)) return "-";
  if (v !== 0 && (Math.abs(v) < 1e-2 || Math.abs(v) >= 1e5)) return v.toExponential(1);
  return v.toFixed(digits);
};

/** One console line per step: step, reward per env, each loss component, mismatch_kl, entropy, speed, staleness. */
export function consoleLine(step: number, maxSteps: number, m: Metrics, envs: readonly string[]): string {
  const rewards = envs.map((env) => `${env} ${num(m[`reward/${env}`])}`).join(" ");
  const losses = COMPONENTS.filter(([c]) => (m[`count/${c}`] ?? 0) > 0).map(
    ([c, label]) => `${label} ${num(m[`loss/${c}`], 4)}`,
  );
  const errors = m["errors/count"] ? ` | errors ${m["errors/count"]}` : "";
  return [
    `step ${step}/${maxSteps}`,
    `reward ${rewards}`,
    `loss ${losses.length ? losses.join(" ") : "-"}`,
    `mismatch_kl ${num(m.mismatch_kl)}`,
    `entropy ${num(m.entropy)}`,
    `${num(m["throughput/train_tokens_per_s"], 0)} tok/s`,
    `${num(m["time/step"], 2)}s (rollouts ${num(m["time/rollouts"], 2)} train ${num(m["time/train"], 2)} reload ${num(m["time/reload"], 2)})`,
    `off-policy ${num(m["off_policy/max"], 0)}${m["off_policy/dropped"] ? ` dropped ${m["off_policy/dropped"]}` : ""}${errors}`,
    ...(evalSummary(m) ? [evalSummary(m)] : []),
  ].join(" | ");
}

/** "eval math avg@8 0.125 pass@1 0.500 greedy 0.600" from the eval/<env>/ keys of a line, or "", with
 * "errored 25%" where rollouts failed (their score 0 is no answer's). */
export function evalSummary(m: Metrics): string {
  const perEnv = new Map<string, string[]>();
  for (const [key, value] of Object.entries(m)) {
    const match = /^eval\/(.+?)\/(avg@\d+|pass@1|greedy\/pass@1|error_rate)$/.exec(key);
    if (!match || (match[2] === "error_rate" && !value)) continue;
    const percent = 100 * value;
    const errored = `errored ${percent < 1 ? percent.toFixed(1) : percent.toFixed(0)}%`;
    const label = match[2] === "greedy/pass@1" ? "greedy" : match[2];
    const part = match[2] === "error_rate" ? errored : `${label} ${num(value)}`;
    perEnv.set(match[1]!, [...(perEnv.get(match[1]!) ?? []), part]);
  }
  return perEnv.size ? `eval ${[...perEnv].map(([env, parts]) => `${env} ${parts.join(" ")}`).join(" ")}` : "";
}

export class MetricsLog {
  private readonly rows: Array<Metrics & { step: number }> = [];
  private readonly notes: Array<Metrics & { step: number }> = [];
  private lastLineAt = performance.now();
  readonly path: string;

  constructor(
    private readonly runDir: string,
    private readonly envs: readonly string[],
    private readonly maxSteps: number,
    private readonly print: (line: string) => void,
    /** Where each row also goes ([log] tensorboard). */
    private readonly tracker?: Pick<TensorBoardLog, "scalars">,
  ) {
    this.path = metricsPath(runDir);
  }

  /** Appends step `step`'s line (both halves, from the publish marker) and prints its console line. */
  publish(step: number, published: PublishedStep, extra: Metrics = {}): Metrics {
    const now = performance.now();
    const row = {
      step,
      time: Date.now() / 1000,
      ...published.orchestrator,
      ...trainerMetrics(published),
      ...extra,
      "time/step": (now - this.lastLineAt) / 1000,
    };
    this.lastLineAt = now;
    appendFileSync(this.path, `${JSON.stringify(row)}\n`);
    this.tracker?.scalars(step, row);
    this.rows.push(row);
    this.print(consoleLine(step, this.maxSteps, row, this.envs));
    return row;
  }

  /** A line of its own (the base model's eval, step 0). */
  note(step: number, metrics: Metrics): void {
    this.notes.push({ step, ...metrics });
    const row = { step, time: Date.now() / 1000, ...metrics };
    appendFileSync(this.path, `${JSON.stringify(row)}\n`);
    this.tracker?.scalars(step, row);
    this.print(`step ${step}/${this.maxSteps} | ${evalSummary(metrics)} | ${num(metrics["time/eval"], 2)}s`);
  }

  /**
   * After a kill, steps up to the checkpoint may have been trained but never logged (the
   * orchestrator died before it saw their markers): their lines are rebuilt from the markers.
   */
  recover(throughStep: number): number[] {
    const logged = new Set<number>();
    if (existsSync(this.path)) {
      for (const line of readFileSync(this.path, "utf8").split("\n"))
        if (line.trim()) logged.add((JSON.parse(line) as { step: number }).step);
    }
    const recovered: number[] = [];
    for (let step = 1; step <= throughStep; step++) {
      const marker = join(weightsDir(this.runDir, step), PUBLISHED_MARKER);
      if (logged.has(step) || !existsSync(marker)) continue;
      const published = JSON.parse(readFileSync(marker, "utf8")) as PublishedStep;
      const row = { step, time: Date.now() / 1000, ...published.orchestrator, ...trainerMetrics(published) };
      appendFileSync(this.path, `${JSON.stringify(row)}\n`);
      this.tracker?.scalars(step, row);
      recovered.push(step);
    }
    return recovered;
  }

  /**
   * The end-of-run table: per env, the mean reward of the first and of the last few steps this
   * process logged (single steps are too noisy to compare), rollout and error counts; then each
   * held-out eval metric at the first and the last eval, and the change; then where a step's time
   * went (rollouts and training overlap when max_async_level >= 1, so the parts can add up to more
   * than the step).
   */
  summary(): string {
    if (this.rows.length === 0) return "no steps were logged";
    const span = Math.max(1, Math.min(3, Math.floor(this.rows.length / 2)));
    const head = this.rows.slice(0, span);
    const tail = this.rows.slice(-span);
    const steps = (rows: typeof this.rows) =>
      rows.length > 1 ? `steps ${rows[0]!.step}-${rows.at(-1)!.step}` : `step ${rows[0]!.step}`;
    const meanOf = (rows: typeof this.rows, key: string) => {
      const values = rows.map((r) => r[key]).filter((v): v is number => v !== undefined);
      return values.length ? num(mean(values)) : "-";
    };
    const total = (key: string) => String(this.rows.reduce((n, r) => n + (r[key] ?? 0), 0));
    const table = formatTable(
      ["env", `reward, ${steps(head)}`, `reward, ${steps(tail)}`, "rollouts", "errors"],
      this.envs.map((env) => [
        env,
        meanOf(head, `reward/${env}`),
        meanOf(tail, `reward/${env}`),
        total(`rollouts/${env}`),
        total(`errors/${env}`),
      ]),
    );
    const time = (key: string) => mean(this.rows.map((r) => r[key] ?? 0)).toFixed(2);
    const timing = [
      `time per step, mean of ${this.rows.length}: ${time("time/step")} s`,
      `rollouts ${time("time/rollouts")} s (held by the async bound ${time("time/wait_for_policy")} s)`,
      `trainer compute ${time("time/train")} s (idle, waiting for its batch ${time("time/trainer_wait")} s)`,
      `weight reload ${time("time/reload")} s`,
    ].join(" | ");
    const evals = this.evals;
    if (evals.length < 2) return `${table}\n\n${timing}`;
    const first = evals[0]!;
    const last = evals.at(-1)!;
    const keys = Object.keys(last).filter(
      (key) => /^eval\/.+\/(avg@\d+|pass@\d+|greedy\/pass@1)$/.test(key) && key in first,
    );
    const evalTable = formatTable(
      ["held-out eval", `step ${first.step}`, `step ${last.step}`, "change"],
      keys.map((key) => {
        const change = last[key]! - first[key]!;
        return [key.slice("eval/".length), num(first[key]), num(last[key]), `${change >= 0 ? "+" : ""}${num(change)}`];
      }),
    );
    return `${table}\n\n${evalTable}\n\n${timing}`;
  }

  /** Every logged line that holds eval results (the step-0 note included), in order. */
  private get evals(): Array<Metrics & { step: number }> {
    return [...this.notes, ...this.rows]
      .filter((r) => Object.keys(r).some((k) => k.startsWith("eval/")))
      .sort((a, b) => a.step - b.step);
  }
}

/** A one-line progress bar on stderr while a step's rollouts generate (TTY only; silent otherwise). */
export class Progress {
  private done = 0;
  private total = 0;
  private active = false;
  private label = "";
  private readonly tty = Boolean(process.stderr.isTTY);

  start(label: string, total: number): void {
    this.label = label;
    this.total = total;
    this.done = 0;
    this.active = true;
    this.render();
  }

  /** Clears the bar until the next start(). */
  stop(): void {
    this.clear();
    this.active = false;
  }

  grow(extra: number): void {
    this.total += extra;
    this.render();
  }

  tick(): void {
    this.done++;
    this.render();
  }

  clear(): void {
    if (this.tty) process.stderr.write("\r\x1b[2K");
  }

  /** Wraps a line printer so its lines never land on the bar's line: clear, print, redraw. */
  around(print: (line: string) => void): (line: string) => void {
    return (line) => {
      this.clear();
      print(line);
      this.render();
    };
  }

  private render(): void {
    if (!this.tty || !this.active || this.total === 0) return;
    const width = 24;
    const filled = this.total ? Math.round((this.done / this.total) * width) : 0;
    process.stderr.write(
      `\r\x1b[2K${this.label} [${"#".repeat(filled)}${".".repeat(width - filled)}] ${this.done}/${this.total} rollouts`,
    );
  }
}
