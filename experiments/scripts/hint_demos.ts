// Demonstrations that teach a model to read OPSD's hint (experiment 6). OPSD's teacher is the
// policy with a system message in front of the sampled sequence, filled from the algorithm's
// template with the task's worked solution; a model that has never seen a system message cannot
// use it (docs/results.md §6). This writes each row of a demonstrations file twice: as it is, and
// with that system message first, rendered from the same template the algorithm uses (the schema
// default unless --template is given), so SFT on the output teaches the student to copy from a
// hint while keeping its unhinted skill. The demonstration is the final assistant turn's content,
// which for `rlx env demos math` is the task's worked solution, the `solution` OPSD reads.
//
//   bun experiments/scripts/hint_demos.ts IN.jsonl OUT.jsonl [--template TEXT] [--hinted-only]
//
// --hinted-only writes only the hinted copies (held-out rows for obs_loss.ts --role assistant:
// how well the hinted model, i.e. OPSD's teacher, predicts the answer).
import { readFileSync, writeFileSync } from "node:fs";
import { Opsd } from "../../src/algorithms/opsd.ts";

const [input, output] = process.argv.slice(2);
if (!input || !output) throw new Error("usage: hint_demos.ts IN.jsonl OUT.jsonl [--template TEXT] [--hinted-only]");
const at = process.argv.indexOf("--template");
const hintedOnly = process.argv.includes("--hinted-only");
const template: string = at > 0 ? process.argv[at + 1]! : Opsd.schema.parse({ type: "opsd" }).template;

interface Row {
  messages: Array<{ role: string; content: string }>;
  [key: string]: unknown;
}
const rows = readFileSync(input, "utf8")
  .split("\n")
  .filter((line) => line.trim())
  .map((line) => JSON.parse(line) as Row);
const out: string[] = [];
for (const row of rows) {
  const demonstration = row.messages.findLast((m) => m.role === "assistant")?.content;
  if (!demonstration) throw new Error(`${input}: a row without an assistant turn (task ${String(row.task_id)})`);
  if (row.messages[0]?.role === "system")
    throw new Error(`${input}: rows already have a system message; OPSD's hint would be a second one`);
  if (!hintedOnly) out.push(JSON.stringify(row));
  out.push(
    JSON.stringify({
      ...row,
      messages: [{ role: "system", content: template.replaceAll("{demonstration}", demonstration) }, ...row.messages],
    }),
  );
}
writeFileSync(output, `${out.join("\n")}\n`);
console.log(`wrote ${out.length} rows (${hintedOnly ? 0 : rows.length} plain, ${rows.length} hinted) to ${output}`);
