// `rlx check RUN_DIR`: every file of a run directory that rlx would trust later, checked offline
// against what was recorded when it was written: each checkpoint against its manifest (sizes and
// CRC-32s, naming the damaged tensor; a sharded one's shards.json too: its ranges, and each
// tensor's piece in each rank file), each published or saved model directory against its
// checksums.json, each step file against the CRC in its preamble, and metrics.jsonl line by line.
// Nothing is changed; a damaged item is reported with what --resume would do about it.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { checkModelDir } from "../model/integrity.ts";
import { checkCheckpoint, PARTIAL_CHECKPOINT } from "./checkpoint.ts";
import { metricsPath } from "./paths.ts";
import { readStepBatch } from "./step_file.ts";

export interface CheckedItem {
  /** Relative to the run directory. */
  path: string;
  status: "ok" | "damaged" | "partial";
  problems: string[];
}

const stepOf = (name: string) => Number(/^step_(\d+)/.exec(name)?.[1] ?? Number.NaN);
const byStep = (names: string[]) => names.sort((a, b) => stepOf(a) - stepOf(b) || a.localeCompare(b));
const entries = (dir: string) => (existsSync(dir) ? byStep(readdirSync(dir)) : []);

/** Checks every checkpoint, model directory, step file and metrics line of `runDir`. */
export function checkRunDir(runDir: string): CheckedItem[] {
  const items: CheckedItem[] = [];
  const add = (path: string, problems: string[], partial = false) =>
    items.push({ path, status: partial ? "partial" : problems.length ? "damaged" : "ok", problems });

  for (const name of entries(join(runDir, "checkpoints"))) {
    if (PARTIAL_CHECKPOINT.test(name))
      add(`checkpoints/${name}`, ["a checkpoint being written when the run stopped"], true);
    else add(`checkpoints/${name}`, checkCheckpoint(join(runDir, "checkpoints", name)));
  }
  for (const name of entries(join(runDir, "weights"))) {
    const dir = join(runDir, "weights", name);
    if (!statSync(dir).isDirectory()) continue;
    if (!/^step_\d+$/.test(name)) add(`weights/${name}`, ["weights being written when the run stopped"], true);
    else add(`weights/${name}`, checkModelDir(dir));
  }
  const model = join(runDir, "model"); // rlx sft's: full weights, or a LoRA adapter
  if (existsSync(join(model, "config.json")) || existsSync(join(model, "adapter_config.json")))
    add("model", checkModelDir(model));
  for (const name of entries(join(runDir, "batches"))) {
    if (!/^step_\d+\.bin$/.test(name)) {
      add(`batches/${name}`, ["a step file being written when the run stopped"], true);
      continue;
    }
    try {
      readStepBatch(join(runDir, "batches", name));
      add(`batches/${name}`, []);
    } catch (err) {
      add(`batches/${name}`, [(err as Error).message]);
    }
  }
  if (existsSync(metricsPath(runDir))) add("metrics.jsonl", checkMetrics(metricsPath(runDir)));
  return items;
}

/** Lines of metrics.jsonl that are not a JSON object with a step (the last may be cut by a kill). */
function checkMetrics(path: string): string[] {
  const lines = readFileSync(path, "utf8").split("\n");
  const problems: string[] = [];
  lines.forEach((line, i) => {
    if (!line.trim()) return;
    try {
      if (typeof (JSON.parse(line) as { step?: unknown }).step !== "number") problems.push(`line ${i + 1} has no step`);
    } catch {
      problems.push(`line ${i + 1} is not JSON${i === lines.length - 1 ? " (cut by a kill? --resume drops it)" : ""}`);
    }
  });
  return problems;
}
