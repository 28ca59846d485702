// `rlx plan [CONFIG]`: how much memory each trainer rank needs, per trainer.shard mode and
// activation checkpointing, before a run is started (src/plan/memory.ts; docs/scaling.md, "Memory
// planner"). Reads the run config and the model's config.json, never the weights.
import { defineCommand } from "citty";
import { totalmem } from "node:os";
import { loadConfig } from "../config/load.ts";
import { ConfigError } from "../errors.ts";
import type { AttentionKind } from "../plan/activations.ts";
import { planMemory, type PlanDevice } from "../plan/memory.ts";
import { plannedModel } from "../plan/shape.ts";
import { planReport, planTable } from "../plan/table.ts";
import { repeated } from "./run.ts";

const HELP_COLUMNS = `Plans one packed row of seq_len tokens per rank (one sample: attention's worst case) with float32
master weights, full fine-tuning. Columns, per rank, in GiB:
  shard        trainer.shard: none (replicated), optimizer (ZeRO-1), full (ZeRO-3)
  ckpt         trainer.activation_checkpointing; "full" always recomputes its layers
  weights      float32 weights: whole, or this rank's slices (full)
  grads        float32 gradients: whole, or this rank's slices (full)
  optimizer    AdamW's two moments (sliced by optimizer and full) plus optimizer's float32 master slice
  activations  what the backward keeps: every layer's saved tensors, or with checkpointing each layer's input
  largest transient  the biggest short-lived buffer: the LM head's logits chunk, a gathered unit with its
               gradient, the tied embedding gathered with its gradient, AdamW's temporaries
  total        the runtime (libtorch; a CUDA context on a GPU) plus the largest moment of a step
  peak at      that moment: load (the whole float32 model, before sharding), lm head, backward, optimizer
  fits         total <= --device-memory`;

function positive(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!(n > 0)) throw new ConfigError(`--${name} ${value}: expected a positive number`);
  return n;
}

export default defineCommand({
  meta: {
    name: "plan",
    description: `Memory per trainer rank for each trainer.shard mode, with and without activation checkpointing\n\n${HELP_COLUMNS}`,
  },
  args: {
    config: {
      type: "positional",
      required: false,
      description: "Run config (TOML): model.path, orchestrator.seq_len, trainer.world_size and trainer.device",
    },
    set: { type: "string", description: "Override a config key: --set orchestrator.seq_len=4096 (repeatable)" },
    model: {
      type: "string",
      description:
        "A preset (qwen3-0.6b, ...) or a model directory instead of the config's model.path; with it no CONFIG is needed",
    },
    "seq-len": { type: "string", description: "Tokens per packed row (default orchestrator.seq_len, or 2048)" },
    ranks: { type: "string", description: "Trainer ranks (default trainer.world_size, or 1)" },
    "context-parallel": {
      type: "string",
      description:
        "Ranks each row is split over along the sequence (default trainer.context_parallel, or 1); divides --ranks",
    },
    device: { type: "string", description: "cpu or cuda (default trainer.device, or cpu)" },
    "device-memory": {
      type: "string",
      description: "GiB per rank that fit (default 80 for cuda; this machine's memory for cpu)",
    },
    attention: {
      type: "string",
      description:
        "blocked (libtorch 1.13: probabilities kept) or sdpa (torch 2.x); default blocked on cpu, sdpa on cuda",
    },
    json: { type: "boolean", description: "Print one JSON object (bytes) instead of the table" },
  },
  async run({ args, rawArgs }) {
    if (args.config === undefined && args.model === undefined)
      throw new ConfigError("rlx plan: give a run config, or a model with --model", {
        fix: "rlx plan configs/quickstart.toml, or rlx plan --model qwen3-0.6b --seq-len 4096 --ranks 8 --device cuda",
      });
    const config = args.config === undefined ? undefined : loadConfig(args.config, repeated(rawArgs, "--set")).config;
    const origin = args.model !== undefined ? "--model" : `${args.config}: model.path`;
    const model = plannedModel(args.model ?? config!.model.path, origin);
    const device = args.device ?? (config?.trainer.device.startsWith("cuda") ? "cuda" : "cpu");
    if (device !== "cpu" && device !== "cuda") throw new ConfigError(`--device ${device}: expected cpu or cuda`);
    const attention = args.attention ?? (device === "cuda" ? "sdpa" : "blocked");
    if (attention !== "blocked" && attention !== "sdpa")
      throw new ConfigError(`--attention ${attention}: expected blocked or sdpa`);
    const seqLen = positive("seq-len", args["seq-len"]) ?? config?.orchestrator.seq_len ?? 2048;
    const ranks = positive("ranks", args.ranks) ?? config?.trainer.world_size ?? 1;
    if (!Number.isInteger(seqLen) || !Number.isInteger(ranks))
      throw new ConfigError(`--seq-len and --ranks must be whole numbers, got ${seqLen} and ${ranks}`);
    const split = positive("context-parallel", args["context-parallel"]) ?? config?.trainer.context_parallel ?? 1;
    if (!Number.isInteger(split) || ranks % split !== 0)
      throw new ConfigError(`--context-parallel ${split}: expected a whole number that divides --ranks ${ranks}`);
    const gib = positive("device-memory", args["device-memory"]);
    const deviceMemory = gib !== undefined ? gib * 2 ** 30 : device === "cuda" ? 80 * 2 ** 30 : totalmem();
    const input = {
      shape: model.shape,
      seqLen,
      ranks,
      device: device as PlanDevice,
      attention: attention as AttentionKind,
      contextParallel: split,
      fileBytesPerParam: model.fileBytesPerParam,
    };
    const report = planReport(model.name, input, deviceMemory, planMemory(input));
    if (args.json) console.log(JSON.stringify(report, null, 1));
    else {
      console.log(planTable(report));
      if (config?.model.lora)
        console.log("note: the config trains LoRA adapters; this plans full fine-tuning of every weight");
    }
  },
});
