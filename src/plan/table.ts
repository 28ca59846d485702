// `rlx plan`'s output: the planner's rows (memory.ts) as a table for people, in GiB per rank.
import type { PlanInput, PlanRow } from "./memory.ts";
import { unitsOf } from "./memory.ts";

const GIB = 2 ** 30;
const gib = (bytes: number) => (bytes / GIB).toFixed(2);

export interface PlanReport {
  model: string;
  params: number;
  input: Omit<PlanInput, "shape">;
  deviceMemoryBytes: number;
  rows: (PlanRow & { fits: boolean })[];
}

export function planReport(model: string, input: PlanInput, deviceMemoryBytes: number, rows: PlanRow[]): PlanReport {
  const { shape: _, ...rest } = input;
  return {
    model,
    params: unitsOf(input.shape).params,
    input: rest,
    deviceMemoryBytes,
    rows: rows.map((r) => ({ ...r, fits: r.total <= deviceMemoryBytes })),
  };
}

export function planTable(report: PlanReport): string {
  const s = report.input;
  const head = [
    `${report.model}: ${report.params.toLocaleString("en-US")} parameters, seq_len ${s.seqLen}, ${s.ranks} rank${s.ranks > 1 ? "s" : ""}${(s.contextParallel ?? 1) > 1 ? ` (rows split over ${s.contextParallel}: ${Math.ceil(s.seqLen / s.contextParallel!)} tokens a rank)` : ""}, ${s.device} (${s.attention} attention), ${gib(report.deviceMemoryBytes)} GiB a device`,
    "per rank, GiB; the total is the largest moment of a step (gradients and activations do not peak together)",
  ];
  const columns = [
    "shard",
    "ckpt",
    "weights",
    "grads",
    "optimizer",
    "activations",
    "largest transient",
    "total",
    "peak at",
    "fits",
  ];
  const cells = report.rows.map((r) => [
    r.shard,
    r.shard === "full" ? "always" : r.checkpointing ? "on" : "off",
    gib(r.weights),
    gib(r.gradients),
    gib(r.optimizer),
    gib(r.activations),
    `${gib(r.transient.bytes)} ${r.transient.name}`,
    gib(r.total),
    r.peakAt,
    r.fits ? "yes" : "no",
  ]);
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i]!.length)));
  const numeric = new Set([2, 3, 4, 5, 7]);
  const line = (row: string[]) =>
    row
      .map((cell, i) => (numeric.has(i) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  const loads = report.rows
    .filter((r) => r.peakAt === "load")
    .map((r) => `${r.shard}: the step alone needs ${gib(r.stepTotal)} GiB`);
  const notes = loads.length
    ? [`peak at load: every rank loads the whole float32 model before it shards it; ${loads.join(", ")}`]
    : [];
  return [...head, "", line(columns), ...cells.map(line), ...notes].join("\n");
}
