// Checks a run's audit records (rollouts/step_N.jsonl) for ECHO on forth: the tokens ECHO weights
// (ce_weights > 0) must decode to exactly the tool outputs, computed here again from the model's own
// tool calls. Per forth rollout, over its samples in order (a template that rewrites earlier turns,
// as Qwen3's drops their <think> blocks, makes a rollout several samples, and a turn's tool output is
// then weighted in the next sample's copy of the conversation): each model turn (a run of loss_mask 1
// ending with a stop token) is parsed as the rollout driver parses it (parseAssistant), each
// <tool_call> is run again on the forth tool (or answered with the malformed-call observation), and
// the rollout's weighted runs of tokens must decode to those outputs, in order, each once. An output
// is compared as the model saw it, UTF-8 encoded (a lone surrogate in a JSON parse error quoting half
// an emoji becomes U+FFFD). Byte-level BPE may merge an output's last character with the template's
// next one (Qwen's ">\n" before "</tool_response>"): such a token is weighted whole and counted as
// `merged`: the weighted text is the output plus at most 2 characters. A weighted run that is no
// tool's output is a mismatch too. Exits 1 on any mismatch, or when fewer than --min tool outputs
// were checked (20 by default).
//
//   bun experiments/scripts/echo_audit.ts RUN_DIR [--min 20] [--json]
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import forth from "../../src/envs/forth/index.ts";
import { createEnv } from "../../src/envs/index.ts";
import { malformedCallObservation, runToolCall } from "../../src/envs/tools.ts";
import { parseAssistant } from "../../src/model/parse.ts";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import { type AuditRecord, parseAudit } from "../../src/rundir/audit.ts";

const { values, positionals } = parseArgs({
  args: Bun.argv.slice(2),
  allowPositionals: true,
  options: { min: { type: "string", default: "20" }, json: { type: "boolean", default: false } },
});
const runDir = positionals[0];
if (!runDir) throw new Error("usage: bun experiments/scripts/echo_audit.ts RUN_DIR [--min 20] [--json]");

// The run's published weights carry its tokenizer files byte for byte.
const weights = readdirSync(join(runDir, "weights")).sort((a, b) => Number(a.slice(5)) - Number(b.slice(5)));
const tokenizer = Tokenizer.load(join(runDir, "weights", weights.at(-1)!));
const stopStrings = tokenizer.stopIds.map((id) => tokenizer.tokenString(id) ?? "").filter((s) => s);
const env = await createEnv(forth, {});
const task = { id: "audit", prompt: [], answer: "", info: {} };

/** [start, end) runs of indices where `on(i)` holds. */
function runs(length: number, on: (i: number) => boolean): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let i = 0; i < length; i++) {
    if (!on(i)) continue;
    const start = i;
    while (i < length && on(i)) i++;
    out.push([start, i]);
  }
  return out;
}

/** The text as the model saw it: through UTF-8, as the tokenizer encodes it. */
const asSeen = (text: string) => new TextDecoder().decode(new TextEncoder().encode(text));

const counts = { rollouts: 0, samples: 0, turns_with_calls: 0, outputs: 0, exact: 0, merged: 0, mismatched: 0 };
const mismatches: Array<{ file: string; rollout: string; expected: string; weighted: string }> = [];
const files = readdirSync(join(runDir, "rollouts")).filter((f) => /^step_\d+\.jsonl$/.test(f));
for (const file of files) {
  const byRollout = new Map<string, AuditRecord[]>();
  for (const record of parseAudit(readFileSync(join(runDir, "rollouts", file), "utf8"))) {
    if (record.env !== "forth" || !record.ce_weights) continue;
    byRollout.set(record.rollout_id, [...(byRollout.get(record.rollout_id) ?? []), record]);
  }
  for (const [rollout, records] of byRollout) {
    counts.rollouts++;
    const expected: string[] = [];
    const weighted: string[] = [];
    for (const record of records.sort((a, b) => a.sample_index - b.sample_index)) {
      counts.samples++;
      const ids = record.token_ids;
      for (const [start, end] of runs(ids.length, (i) => record.loss_mask[i] === 1)) {
        // a turn cut off at max_tokens (no stop token) runs no tools, as in the rollout driver
        if (!tokenizer.stopIds.includes(ids[end - 1]!)) continue;
        const parsed = parseAssistant(tokenizer.decode(ids.slice(start, end)), stopStrings);
        if (parsed.blocks.length > 0) counts.turns_with_calls++;
        for (const block of parsed.blocks)
          expected.push(
            asSeen(
              "error" in block
                ? malformedCallObservation(block.error).content
                : (await runToolCall(env.tools, block.call, task)).message.content,
            ),
          );
      }
      for (const [start, end] of runs(ids.length, (i) => record.ce_weights![i]! > 0))
        weighted.push(tokenizer.decode(ids.slice(start, end)));
    }
    for (let j = 0; j < Math.max(expected.length, weighted.length); j++) {
      const [output, got] = [expected[j], weighted[j]];
      if (output !== undefined) counts.outputs++;
      if (output !== undefined && got === output) counts.exact++;
      else if (output !== undefined && got?.startsWith(output) && got.length - output.length <= 2) counts.merged++;
      else {
        counts.mismatched++;
        mismatches.push({ file, rollout, expected: output ?? "(none)", weighted: got ?? "(none)" });
      }
    }
  }
}
const min = Number(values.min);
const ok = counts.mismatched === 0 && counts.outputs >= min;
if (values.json) console.log(JSON.stringify({ run: runDir, ...counts, ok, mismatches: mismatches.slice(0, 5) }));
else {
  console.log(
    `${runDir}: ${counts.rollouts} forth rollouts with ECHO weights (${counts.samples} samples), ${counts.turns_with_calls} turns with tool calls, ` +
      `${counts.outputs} tool outputs: ${counts.exact} weighted exactly, ${counts.merged} with one token merged ` +
      `across the output's end, ${counts.mismatched} mismatched`,
  );
  for (const m of mismatches.slice(0, 5))
    console.log(
      `  ${m.file} ${m.rollout}: expected ${JSON.stringify(m.expected)}, weighted ${JSON.stringify(m.weighted)}`,
    );
  if (counts.outputs < min) console.log(`  fewer than --min ${min} tool outputs checked`);
}
process.exit(ok ? 0 : 1);
