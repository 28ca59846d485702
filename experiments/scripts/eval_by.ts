// Splits `rlx eval --out` results into task groups by a regular expression on the task id, and
// prints greedy pass@1, pass@1 and pass@k per group (passMetrics of src/eval/evaluate.ts, the
// same metrics rlx eval computes over all tasks; a greedy sample counts when its reward is 1).
// Experiment 3's mixed-operation variant reads the addition and subtraction halves apart with it:
//
//   bun experiments/scripts/eval_by.ts EVAL.json [EVAL.json ...] [--by ' [-+] '] [--json]
//
// A task id like "63 - 17" falls in the group named by the first match ("-"); ids without a match
// go to "other". One row per file and group.
import { readFileSync } from "node:fs";
import { formatTable } from "../../src/eval/table.ts";
import { passMetrics, type TaskEval } from "../../src/eval/evaluate.ts";

interface EvalFile {
  envs: Array<{ env: string; k: number; results: TaskEval[] }>;
}

const args = process.argv.slice(2);
const byAt = args.indexOf("--by");
const by = new RegExp(byAt >= 0 ? args[byAt + 1]! : " [-+] ");
const files = args.filter((a, i) => a.endsWith(".json") && (byAt < 0 || i !== byAt + 1));
if (files.length === 0) throw new Error("usage: eval_by.ts EVAL.json [...] [--by REGEX] [--json]");

const rows: Array<Record<string, string | number>> = [];
for (const file of files) {
  const data = JSON.parse(readFileSync(file, "utf8")) as EvalFile;
  for (const env of data.envs) {
    const groups = new Map<string, TaskEval[]>();
    for (const r of env.results) {
      const group = by.exec(r.taskId)?.[0].trim() ?? "other";
      groups.set(group, [...(groups.get(group) ?? []), r]);
    }
    for (const [group, results] of [...groups].sort()) {
      const metrics = passMetrics(
        results,
        env.k,
        1,
        results.every((r) => r.greedyReward !== undefined),
      );
      rows.push({
        file,
        env: env.env,
        group,
        tasks: results.length,
        greedy: metrics["greedy/pass@1"] ?? 0,
        "pass@1": metrics["pass@1"]!,
        [`pass@${env.k}`]: metrics[`pass@${env.k}`]!,
      });
    }
  }
}
if (args.includes("--json")) console.log(JSON.stringify(rows));
else {
  const header = Object.keys(rows[0] ?? {});
  console.log(
    formatTable(
      header,
      rows.map((row) =>
        header.map((h) =>
          typeof row[h] === "number" && h !== "tasks" ? (row[h] as number).toFixed(3) : String(row[h]),
        ),
      ),
    ),
  );
}
