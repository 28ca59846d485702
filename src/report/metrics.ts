// A run's metrics.jsonl, read for the report: one row per line with a numeric `step`. A line cut
// by a crash is an error naming the file and line (and how to mend it).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { RlxError } from "../errors.ts";

export type MetricsRow = Record<string, number> & { step: number };

export function readMetrics(runDir: string): MetricsRow[] {
  const path = join(runDir, "metrics.jsonl");
  if (!existsSync(path))
    throw new RlxError(`no metrics.jsonl in ${runDir}`, {
      fix: "give the output_dir of an rlx train or rlx sft run",
    });
  const rows: MetricsRow[] = [];
  readFileSync(path, "utf8")
    .split("\n")
    .forEach((line, i) => {
      if (!line.trim()) return;
      let row: Record<string, unknown>;
      try {
        row = JSON.parse(line) as Record<string, unknown>;
      } catch {
        throw new RlxError(`${path}:${i + 1}: not a JSON object`, {
          fix: "a line was cut by a crash? delete it and run the report again",
        });
      }
      if (typeof row.step !== "number") return;
      const numeric = Object.entries(row).filter(([, v]) => typeof v === "number" && Number.isFinite(v));
      rows.push(Object.fromEntries(numeric) as MetricsRow);
    });
  return rows;
}
