// What a run of experiments/scripts/sampling.sh spent and trained on, from its metrics.jsonl: the
// rollouts it generated (fresh groups drawn, admitted or rejected by a gate, times group_size;
// replayed groups cost nothing), the steps it trained, and the mean share of each step's groups
// whose rewards differed (sampling/signal_share, the groups that carry a learning signal).
//
//   bun experiments/scripts/sampling_budget.ts RUN_DIR GROUP_SIZE     prints one JSON object
import { readFileSync } from "node:fs";
import { join } from "node:path";

const [runDir, groupSizeArg] = process.argv.slice(2);
if (!runDir || !groupSizeArg) throw new Error("usage: sampling_budget.ts RUN_DIR GROUP_SIZE");
const groupSize = Number(groupSizeArg);
const rows = readFileSync(join(runDir, "metrics.jsonl"), "utf8")
  .split("\n")
  .filter((line) => line.trim())
  .map((line) => JSON.parse(line) as Record<string, number>)
  .filter((row) => row["rollouts/count"] !== undefined); // step lines (not the step-0 eval)
let generated = 0;
for (const row of rows)
  for (const [key, value] of Object.entries(row))
    if (/^sampling\/[^/]+\/(admitted|rejected|over_bound)$/.test(key)) generated += value * groupSize;
const shares = rows.map((row) => row["sampling/signal_share"] ?? 0);
console.log(
  JSON.stringify({
    steps: rows.length,
    generated,
    signal_share: shares.length ? shares.reduce((a, b) => a + b, 0) / shares.length : 0,
  }),
);
