// The planner against measured peaks: bench/shard_memory.ts's committed row (per-rank VmHWM of
// trainer ranks on the qwen3-0.6b shape, CPU, Gloo) must each be within 15% of `rlx plan`'s total
// for the same shape, seq_len, ranks and mode (docs/scaling.md, "Memory planner").
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { getPreset } from "../../../src/model/presets.ts";
import { planRow, type PlanShard } from "../../../src/plan/memory.ts";

const ROW = join(import.meta.dir, "../../../experiments/results/shard_memory/epyc-1/qwen3-0.6b.json");

interface MeasuredRun {
  mode: PlanShard;
  world: number;
  checkpointing: boolean;
  seqLen: number;
  layers: number;
  peakGib?: number;
  killed?: string;
}

function plannedGib(run: MeasuredRun, preset = "qwen3-0.6b"): number {
  const shape = { ...getPreset(preset).config.shim, num_hidden_layers: run.layers };
  const input = { shape, seqLen: run.seqLen, ranks: run.world, device: "cpu" as const, attention: "blocked" as const };
  return planRow({ ...input, fileBytesPerParam: 2 }, run.mode, run.checkpointing).total / 2 ** 30;
}

test("every measured peak is within 15% of the plan", () => {
  const row = JSON.parse(readFileSync(ROW, "utf8")) as { preset: string; runs: Record<string, MeasuredRun> };
  const measured = Object.entries(row.runs).filter(([, run]) => run.peakGib !== undefined);
  expect(measured.length).toBeGreaterThanOrEqual(4);
  const off = measured
    .map(([name, run]) => ({ name, measured: run.peakGib!, planned: plannedGib(run, row.preset) }))
    .filter((r) => Math.abs(r.planned / r.measured - 1) > 0.15);
  expect(off).toEqual([]);
});
