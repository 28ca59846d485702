// docs/scaling.md's "Memory planner" tables: `rlx plan --json` over the Qwen3 shapes (the
// qwen3-0.6b preset and experiments/configs/shapes/) on 1 and 8 GPUs of 80 GB at seq_len 4096,
// one markdown row per shape and GPU count; and the CPU rows of bench/shard_memory.ts's committed
// result beside what the planner says for each.
//
//   bun experiments/scripts/plan_table.ts [--seq-len 4096] [--measured experiments/results/shard_memory/epyc-1/qwen3-0.6b.json]
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { getPreset } from "../../src/model/presets.ts";
import { planMemory, planRow, type PlanRow, type PlanShard } from "../../src/plan/memory.ts";
import { plannedModel } from "../../src/plan/shape.ts";

const ROOT = join(import.meta.dir, "../..");
const flag = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : fallback;
};
const GIB = 2 ** 30;
const seqLen = Number(flag("seq-len", "4096"));
const models = ["qwen3-0.6b", ...["qwen3-4b", "qwen3-8b", "qwen3-32b"].map((m) => `experiments/configs/shapes/${m}`)];
const cell = (r: PlanRow) => `${(r.total / GIB).toFixed(1)}${r.total <= 80 * GIB ? "" : " (no)"}`;

console.log("| model | params | GPUs | none, ckpt off | none, ckpt on | optimizer, ckpt on | full | full peaks at |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
for (const source of models) {
  const model = plannedModel(source.includes("/") ? join(ROOT, source) : source, "--model");
  for (const ranks of [1, 8]) {
    const input = {
      shape: model.shape,
      seqLen,
      ranks,
      device: "cuda" as const,
      attention: "sdpa" as const,
      fileBytesPerParam: 2,
    };
    const [noneOff, noneOn, , optimizerOn, full] = planMemory(input) as PlanRow[];
    const params = planRow(input, "none", false).weights / 4 / 1e9;
    const sharded = ranks > 1;
    const at = full!.peakAt === "load" ? `load (the step alone ${(full!.stepTotal / GIB).toFixed(1)})` : full!.peakAt;
    const cells = [
      cell(noneOff!),
      cell(noneOn!),
      sharded ? cell(optimizerOn!) : "-",
      sharded ? cell(full!) : "-",
      sharded ? at : "-",
    ];
    console.log(`| ${source.split("/").at(-1)} | ${params.toFixed(2)}B | ${ranks} | ${cells.join(" | ")} |`);
  }
}

const measuredFile = flag("measured", join(ROOT, "experiments/results/shard_memory/epyc-1/qwen3-0.6b.json"));
const row = JSON.parse(readFileSync(measuredFile, "utf8")) as {
  preset: string;
  runs: Record<
    string,
    { mode: PlanShard; world: number; checkpointing: boolean; seqLen: number; layers: number; peakGib?: number }
  >;
};
console.log(
  "\n| run | shard | ranks | layers | seq_len | ckpt | measured peak GiB | planned GiB | planned / measured |",
);
console.log("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |");
for (const [name, run] of Object.entries(row.runs)) {
  if (run.peakGib === undefined) continue;
  const shape = { ...getPreset(row.preset).config.shim, num_hidden_layers: run.layers };
  const input = { shape, seqLen: run.seqLen, ranks: run.world, device: "cpu" as const, attention: "blocked" as const };
  const planned = planRow({ ...input, fileBytesPerParam: 2 }, run.mode, run.checkpointing).total / GIB;
  const ckpt = run.mode === "full" ? "always" : run.checkpointing ? "on" : "off";
  console.log(
    `| ${name} | ${run.mode} | ${run.world} | ${run.layers} | ${run.seqLen} | ${ckpt} | ${run.peakGib.toFixed(2)} | ${planned.toFixed(2)} | ${(planned / run.peakGib).toFixed(2)} |`,
  );
}
